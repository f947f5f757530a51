import { JupyterLab } from '@jupyterlab/application';
import { CommandLinker, ISanitizer, Sanitizer } from '@jupyterlab/apputils';
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
// platform does not reach (and whose prompt would cover the notebook). "Open from URL" fetches any
// address with the member's session (the lab shares the platform's origin) and saves the answer
// in the workspace, and the settings' sanitizer lets markdown and outputs carry command links
// (`data-commandlinker-command`) that run any command with any arguments on a click; its place
// is taken by the sanitizer below (decision 0249).
const LEFT_OUT = new Set([
  '@jupyterlab/apputils-extension:announcements',
  '@jupyterlab/filebrowser-extension:open-url',
  '@jupyterlab/apputils-extension:sanitizer',
]);

/** JupyterLab's HTML sanitizer, without command links or named properties whatever the settings say. */
const sanitizer = {
  id: '@codeagent/lab-host:sanitizer',
  description: 'Provides the HTML sanitizer: no command links, no named properties.',
  autoStart: true,
  provides: ISanitizer,
  activate: () => {
    const s = new Sanitizer();
    s.setAllowCommandLinker(false);
    s.setAllowNamedProperties(false);
    return s;
  },
};

/**
 * Command links (`data-commandlinker-command` and its arguments on any element) run nothing in
 * this lab: no part of it makes them, and a cell's live output, which JupyterLab renders
 * unsanitised, could carry one that runs any command with any arguments on a click.
 */
class NoCommandLinks extends CommandLinker {
  handleEvent() {}
}

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

  plugins.push(sanitizer);
  const pluginRegistry = new JupyterPluginRegistry();
  pluginRegistry.registerPlugins(plugins);
  const serviceManager = await pluginRegistry.resolveRequiredService(IServiceManager);
  const connectionStatus = await pluginRegistry.resolveOptionalService(IConnectionStatus);
  const commandLinker = new NoCommandLinks({ commands: undefined });
  const lab = new JupyterLab({ pluginRegistry, serviceManager, connectionStatus, mimeExtensions, commandLinker });
  await lab.start({ bubblingKeydown: true });
  // The browser tests drive the app through this handle.
  window.jupyterapp = lab;
}
