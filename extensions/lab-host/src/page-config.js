// Reads the page config that jupyterlab_server writes into index.html. It runs before any
// JupyterLab package is loaded, so it cannot use @jupyterlab/coreutils' PageConfig.
let cached = null;
export function pageOption(name) {
  if (cached === null) {
    const el = document.getElementById('jupyter-config-data');
    cached = el ? JSON.parse(el.textContent || '{}') : {};
  }
  return cached[name] ?? '';
}
