import { Notification } from '@jupyterlab/apputils';
import { ServerConnection } from '@jupyterlab/services';
import type { ISettingRegistry } from '@jupyterlab/settingregistry';
import { Widget } from '@lumino/widgets';
import { choiceValue, currentChoice, modelChoices, parseChoiceValue, parseProviders, type ProviderList } from './logic/providers';
import { bridgeUrl, SETTINGS_PLACE } from './logic/request';

/** The bridge's provider list, fetched once per page and shared by every picker (retried after a failure). */
export class ProviderSource {
  private pending: Promise<ProviderList> | null = null;

  constructor(private readonly server: ServerConnection.ISettings) {}

  list(): Promise<ProviderList> {
    if (this.pending === null) {
      const p = this.fetch();
      this.pending = p;
      p.catch(() => {
        if (this.pending === p) this.pending = null;
      });
    }
    return this.pending;
  }

  private async fetch(): Promise<ProviderList> {
    let res: Response;
    try {
      res = await ServerConnection.makeRequest(bridgeUrl(this.server.baseUrl, 'providers'), {}, this.server);
    } catch (err) {
      throw new Error(`The bridge is not reachable (${(err as Error).message}). Check that the platform is running, then reopen the list.`, { cause: err });
    }
    const body: unknown = await res.json().catch(() => null);
    if (res.ok) return parseProviders(body);
    const code = typeof (body as { error?: unknown } | null)?.error === 'string' ? (body as { error: string }).error : `HTTP ${res.status}`;
    if (code === 'upstream_unreachable')
      throw new Error(`The code-agent server is not reachable. Start it (\`opencode serve\`) or correct "Code-agent server URL" in ${SETTINGS_PLACE}.`);
    throw new Error(`The bridge could not list the models (${code}). Check the code-agent server, then reopen the list.`);
  }
}

/**
 * The notebook toolbar's model picker: the providers and models of the bridge's `/providers`,
 * the choice stored as the user's `codeagentProvider` and `codeagentModel` settings, which the
 * cell actions send with each request. "Default model" removes both, so the bridge's own
 * configuration applies again.
 */
export class ModelPicker extends Widget {
  private readonly select = document.createElement('select');

  constructor(
    private readonly source: ProviderSource,
    private readonly settings: Promise<ISettingRegistry.ISettings | null>,
  ) {
    super();
    this.addClass('codeagent-ModelPicker');
    const label = document.createElement('label');
    label.textContent = 'Model';
    label.className = 'codeagent-ModelPicker-label';
    this.select.className = 'jp-mod-styled codeagent-model-picker';
    this.select.title = 'Which model the code agent uses for Optimize, Fix and Edit';
    this.select.setAttribute('aria-label', 'Code agent model');
    label.appendChild(this.select);
    this.node.appendChild(label);
    this.select.addEventListener('change', () => void this.choose(this.select.value));
    // A failed list is fetched again when the user comes back to the picker.
    this.select.addEventListener('focus', () => {
      if (this.select.dataset.state === 'error') void this.render();
    });
    void this.settings.then((s) => {
      if (!s || this.isDisposed) return;
      const onChange = () => void this.render();
      s.changed.connect(onChange);
      this.disposed.connect(() => s.changed.disconnect(onChange));
    });
    void this.render();
  }

  private async render(): Promise<void> {
    const settings = await this.settings;
    const current = currentChoice(settings?.user);
    let list: ProviderList;
    try {
      list = await this.source.list();
    } catch (err) {
      this.select.replaceChildren(new Option('Models unavailable', '', true, true));
      this.select.dataset.state = 'error';
      this.select.title = (err as Error).message;
      return;
    }
    const groups = new Map<string, HTMLOptGroupElement>();
    const nodes: (HTMLOptionElement | HTMLOptGroupElement)[] = [];
    for (const c of modelChoices(list, current)) {
      const option = new Option(c.label, c.value);
      option.dataset.provider = c.provider;
      option.dataset.model = c.model;
      if (c.group === '') {
        nodes.push(option);
        continue;
      }
      let g = groups.get(c.group);
      if (!g) {
        g = document.createElement('optgroup');
        g.label = c.group;
        groups.set(c.group, g);
        nodes.push(g);
      }
      g.appendChild(option);
    }
    this.select.replaceChildren(...nodes);
    this.select.value = choiceValue(current.provider, current.model);
    this.select.dataset.state = 'ready';
    this.select.title = 'Which model the code agent uses for Optimize, Fix and Edit';
    this.select.disabled = settings === null;
    if (settings === null) this.select.title = 'The settings of Code agent bridge could not be loaded; reload the page.';
  }

  private async choose(value: string): Promise<void> {
    const settings = await this.settings;
    if (!settings) return;
    const { provider, model } = parseChoiceValue(value);
    try {
      if (provider === '' && model === '') {
        await settings.remove('codeagentProvider');
        await settings.remove('codeagentModel');
      } else {
        await settings.set('codeagentProvider', provider);
        await settings.set('codeagentModel', model);
      }
    } catch (err) {
      Notification.error(`The model could not be saved (${(err as Error).message}). Set it in ${SETTINGS_PLACE}.`, { autoClose: 8000 });
      void this.render();
    }
  }
}
