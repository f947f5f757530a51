// Vite builds the SPA into dist/app: index.html plus content-hashed files under /assets/, which the
// gateway serves as immutable. No inline script or style ends up in index.html (the app's CSP
// allows neither), and no plugin is needed: Vite's own transform handles TSX (automatic runtime).
import { defineConfig } from 'vite';

export default defineConfig({
  root: import.meta.dirname,
  base: '/',
  publicDir: false,
  oxc: { jsx: { runtime: 'automatic', importSource: 'react' } },
  build: {
    outDir: 'dist/app',
    emptyOutDir: true,
    assetsDir: 'assets',
    // Never inline assets as data: URLs into scripts or styles; a file each, hashed.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    target: 'es2022',
  },
});
