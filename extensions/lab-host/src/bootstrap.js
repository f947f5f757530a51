import { pageOption } from './page-config.js';

function addScript(url) {
  return new Promise((resolve, reject) => {
    const script = document.createElement('script');
    script.async = true;
    script.onload = resolve;
    script.onerror = () => reject(new Error(`cannot load ${url}`));
    script.src = url;
    document.head.appendChild(script);
  });
}

// Each prebuilt extension is a module-federation container. All containers must be initialised
// with the shared scope before the application code imports anything, so that one copy of each
// shared package (the host's, when versions agree) is used by everyone.
async function initialiseContainer(base, ext) {
  await addScript(`${base}/${ext.name}/${ext.load}`);
  // eslint-disable-next-line no-undef
  await __webpack_init_sharing__('default');
  // eslint-disable-next-line no-undef
  await window._JUPYTERLAB[ext.name].init(__webpack_share_scopes__.default);
}

(async () => {
  const federated = pageOption('federated_extensions') || [];
  const base = pageOption('fullLabextensionsUrl');
  const results = await Promise.allSettled(federated.map((ext) => initialiseContainer(base, ext)));
  for (const r of results) if (r.status === 'rejected') console.error(r.reason);
  const { main } = await import('./main.js');
  if (document.readyState === 'complete') void main();
  else window.addEventListener('load', () => void main());
})();
