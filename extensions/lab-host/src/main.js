import { JupyterLab } from '@jupyterlab/application';
import { JupyterPluginRegistry, PageConfig } from '@jupyterlab/coreutils';
import { IConnectionStatus, IServiceManager } from '@jupyterlab/services';
import '@lab-host-build/style.js';
import { builtinExtensions } from '@lab-host-build/extensions.js';

function pluginsOf(module) {
  const exported = Object.prototype.hasOwnProperty.call(module, '__esModule') ? module.default : module;
  return Array.isArray(exported) ? exported : [exported];
}

async function federatedModule(scope, modulePath) {
  const factory = await window._JUPYTERLAB[scope].get(modulePath);
  return factory();
}

// Plugins this host leaves out: the news announcements fetch from the internet, which the
// platform does not reach (and whose prompt would cover the notebook).
const LEFT_OUT = new Set(['@jupyterlab/apputils-extension:announcements']);

/** Registers the built-in plugins and those of the prebuilt extensions, then starts the app. */
export async function main() {
  const isDisabled = (id) => LEFT_OUT.has(id) || PageConfig.Extension.isDisabled(id);
  const federated = JSON.parse(PageConfig.getOption('federated_extensions') || '[]');
  const plugins = [];
  const mimeExtensions = [];

  for (const load of builtinExtensions) {
    for (const plugin of pluginsOf(await load())) if (!isDisabled(plugin.id)) plugins.push(plugin);
  }
  for (const ext of federated) {
    try {
      if (ext.style) await federatedModule(ext.name, ext.style);
      if (ext.extension) {
        for (const plugin of pluginsOf(await federatedModule(ext.name, ext.extension))) {
          if (!isDisabled(plugin.id)) plugins.push(plugin);
        }
      }
      if (ext.mimeExtension) {
        for (const plugin of pluginsOf(await federatedModule(ext.name, ext.mimeExtension))) mimeExtensions.push(plugin);
      }
    } catch (err) {
      console.error(`extension ${ext.name} could not be loaded`, err);
    }
  }

  const pluginRegistry = new JupyterPluginRegistry();
  pluginRegistry.registerPlugins(plugins);
  const serviceManager = await pluginRegistry.resolveRequiredService(IServiceManager);
  const connectionStatus = await pluginRegistry.resolveOptionalService(IConnectionStatus);
  const lab = new JupyterLab({ pluginRegistry, serviceManager, connectionStatus, mimeExtensions });
  await lab.start({ bubblingKeydown: true });
  // The browser tests drive the app through this handle.
  window.jupyterapp = lab;
}
