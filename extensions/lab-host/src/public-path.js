import { pageOption } from './page-config.js';
// Bundles are served under the server's static URL, known only at run time.
// eslint-disable-next-line no-undef
__webpack_public_path__ = `${pageOption('fullStaticUrl')}/`;
