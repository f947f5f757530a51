import type { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { IToolbarWidgetRegistry, ToolbarButton } from '@jupyterlab/apputils';
import type { Cell } from '@jupyterlab/cells';
import { IEditorServices } from '@jupyterlab/codeeditor';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { CodeagentCellFooter, footerOf, type FooterContext } from './footer';
import { bridgeUrl } from './logic/request';

const PLUGIN_ID = 'jupyterlab-codeagent-bridge:plugin';

/** Settings of the extension, loaded by the settings plugin and read by every footer. */
let loadedSettings: ISettingRegistry.ISettings | null = null;
/** Set once the settings plugin is active; the footers read the open notebooks through it. */
let notebooks: INotebookTracker | null = null;

/** Settings, the cell-toolbar entry `codeagent-cell-actions`, and the providers list in the console. */
const settingsPlugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'Settings of the code agent bridge; logs the available providers on start.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ISettingRegistry, IToolbarWidgetRegistry],
  activate: async (app: JupyterFrontEnd, tracker: INotebookTracker, registry: ISettingRegistry | null, toolbars: IToolbarWidgetRegistry | null) => {
    notebooks = tracker;
    toolbars?.addFactory<Cell>('Cell', 'codeagent-cell-actions', (cell) => {
      return new ToolbarButton({
        className: 'codeagent-toolbar-fix',
        label: 'Fix',
        tooltip: 'Ask the code agent to fix this cell',
        onClick: () => void footerOf(cell)?.run('fix'),
      });
    });
    if (registry) {
      try {
        loadedSettings = await registry.load(PLUGIN_ID);
      } catch (err) {
        console.error('codeagent-bridge: settings could not be loaded', err);
      }
    }
    const server = app.serviceManager.serverSettings;
    try {
      const res = await ServerConnection.makeRequest(bridgeUrl(server.baseUrl, 'providers'), {}, server);
      const body: unknown = await res.json().catch(() => null);
      if (res.ok) console.log('codeagent-bridge providers:', body);
      else console.warn(`codeagent-bridge providers: HTTP ${res.status}`, body);
    } catch (err) {
      console.warn('codeagent-bridge providers: the bridge is not reachable', err);
    }
  },
};

/** Replaces the notebook's content factory so that every cell gets the codeagent footer. */
const cellFooterPlugin: JupyterFrontEndPlugin<NotebookPanel.IContentFactory> = {
  id: 'jupyterlab-codeagent-bridge:cell-footer',
  description: 'Puts optimize / fix / edit under every code cell.',
  autoStart: true,
  provides: NotebookPanel.IContentFactory,
  requires: [IEditorServices],
  activate: (app: JupyterFrontEnd, editorServices: IEditorServices) => {
    const ctx: FooterContext = {
      serverSettings: app.serviceManager.serverSettings,
      settings: () => loadedSettings,
      notebooks: {
        find: (fn) => notebooks?.find(fn),
      } as INotebookTracker,
    };
    class ContentFactory extends NotebookPanel.ContentFactory {
      createCellFooter(): CodeagentCellFooter {
        return new CodeagentCellFooter(ctx);
      }
    }
    return new ContentFactory({ editorFactory: editorServices.factoryService.newInlineEditor });
  },
};

export default [settingsPlugin, cellFooterPlugin];
