import type { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { IToolbarWidgetRegistry, ToolbarButton } from '@jupyterlab/apputils';
import type { Cell } from '@jupyterlab/cells';
import { IEditorServices } from '@jupyterlab/codeeditor';
import { NotebookPanel } from '@jupyterlab/notebook';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { CodeagentCellFooter, footerOf } from './footer';
import { ModelPicker, ProviderSource } from './picker';

/** The id whose settings schema is schema/plugin.json. */
const PLUGIN_ID = 'jupyterlab-codeagent-bridge:plugin';

/**
 * Logs the bridge's providers on start (docs/contract/spec.md §9.5), adds the `codeagent-cell-actions` cell-toolbar
 * entry, and the `codeagent-model` notebook-toolbar entry: the model picker fed by `/providers`.
 */
const mainPlugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'Code agent bridge: settings, providers in the console, cell toolbar entry, model picker.',
  autoStart: true,
  optional: [IToolbarWidgetRegistry, ISettingRegistry],
  activate: async (app: JupyterFrontEnd, toolbars: IToolbarWidgetRegistry | null, registry: ISettingRegistry | null) => {
    // The toolbar variant: the schema declares the item, this makes its widget.
    toolbars?.addFactory<Cell>('Cell', 'codeagent-cell-actions', (cell) => {
      return new ToolbarButton({
        className: 'codeagent-toolbar-fix',
        label: 'Fix',
        tooltip: 'Ask the code agent to fix this cell',
        onClick: () => void footerOf(cell)?.run('fix'),
      });
    });
    const source = new ProviderSource(app.serviceManager.serverSettings);
    const settings: Promise<ISettingRegistry.ISettings | null> = registry
      ? registry.load(PLUGIN_ID).catch((err: unknown) => {
          console.error('codeagent-bridge: settings could not be loaded', err);
          return null;
        })
      : Promise.resolve(null);
    toolbars?.addFactory<NotebookPanel>('Notebook', 'codeagent-model', () => new ModelPicker(source, settings));
    try {
      const list = await source.list();
      console.log('codeagent-bridge providers:', list);
    } catch (err) {
      console.warn(`codeagent-bridge providers: ${(err as Error).message}`);
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
  optional: [ISettingRegistry],
  activate: (app: JupyterFrontEnd, editorServices: IEditorServices, registry: ISettingRegistry | null) => {
    // Loaded in the background: notebooks must not wait for the settings; until they are
    // loaded, requests carry no user settings and use the default time-out.
    let settings: ISettingRegistry.ISettings | null = null;
    registry?.load(PLUGIN_ID).then(
      (loaded) => (settings = loaded),
      (err: unknown) => console.error('codeagent-bridge: settings could not be loaded', err),
    );
    const ctx = { serverSettings: app.serviceManager.serverSettings, settings: () => settings };
    class ContentFactory extends NotebookPanel.ContentFactory {
      createCellFooter(): CodeagentCellFooter {
        return new CodeagentCellFooter(ctx);
      }
    }
    return new ContentFactory({ editorFactory: editorServices.factoryService.newInlineEditor });
  },
};

export default [mainPlugin, cellFooterPlugin];
