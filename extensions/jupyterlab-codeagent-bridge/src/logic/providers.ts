/**
 * The model picker's rules, without JupyterLab: the `/providers` answer (docs/contract/spec.md §9.2) turned into
 * the picker's choices, and a choice turned into the two settings the cell actions send.
 */

export interface ProviderList {
  providers: { id: string; name: string; models: { id: string; name: string }[] }[];
  /** provider id → that provider's default model id */
  default: Record<string, string>;
}

/** One entry of the picker: a provider and one of its models (both empty: the server's default). */
export interface ModelChoice {
  value: string;
  provider: string;
  model: string;
  label: string;
  /** The provider's name, to group the entries. Empty for the server-default entry. */
  group: string;
}

/** The entry that sends neither setting, so the bridge's own configuration decides. */
export const SERVER_DEFAULT: ModelChoice = Object.freeze({ value: '', provider: '', model: '', label: 'Default model', group: '' });

function str(v: unknown): string {
  return typeof v === 'string' ? v : '';
}

/** Reads a `/providers` body defensively: entries without an id are dropped, names fall back to ids. */
export function parseProviders(body: unknown): ProviderList {
  const b = (typeof body === 'object' && body !== null ? body : {}) as { providers?: unknown; default?: unknown };
  const providers = (Array.isArray(b.providers) ? b.providers : [])
    .map((p: unknown) => {
      const o = (typeof p === 'object' && p !== null ? p : {}) as { id?: unknown; name?: unknown; models?: unknown };
      const id = str(o.id);
      const models = (Array.isArray(o.models) ? o.models : [])
        .map((m: unknown) => {
          const mo = (typeof m === 'object' && m !== null ? m : {}) as { id?: unknown; name?: unknown };
          return { id: str(mo.id), name: str(mo.name) || str(mo.id) };
        })
        .filter((m) => m.id !== '');
      return { id, name: str(o.name) || id, models };
    })
    .filter((p) => p.id !== '');
  const def: Record<string, string> = {};
  if (typeof b.default === 'object' && b.default !== null) {
    for (const [k, v] of Object.entries(b.default as Record<string, unknown>)) if (typeof v === 'string') def[k] = v;
  }
  return { providers, default: def };
}

/** The value of the `<option>` of a provider and model (ids may hold `/`, so JSON, not a join). */
export function choiceValue(provider: string, model: string): string {
  return provider === '' && model === '' ? '' : JSON.stringify([provider, model]);
}

/** The provider and model an option value stands for; the server default for anything else. */
export function parseChoiceValue(value: string): { provider: string; model: string } {
  try {
    const v: unknown = JSON.parse(value);
    if (Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' && typeof v[1] === 'string') return { provider: v[0], model: v[1] };
  } catch {
    /* the server default */
  }
  return { provider: '', model: '' };
}

/**
 * The picker's entries: the server default first, then every model of every provider, the
 * provider's default model marked. A provider/model set in the settings but absent from the list
 * (a typo, a removed model) stays visible and selected, marked as such, rather than silently shown
 * as something else.
 */
export function modelChoices(list: ProviderList, current: { provider: string; model: string }): ModelChoice[] {
  const out: ModelChoice[] = [SERVER_DEFAULT];
  for (const p of list.providers) {
    for (const m of p.models) {
      const mark = list.default[p.id] === m.id ? ' (default)' : '';
      out.push({ value: choiceValue(p.id, m.id), provider: p.id, model: m.id, label: `${m.name}${mark}`, group: p.name });
    }
  }
  const value = choiceValue(current.provider, current.model);
  if (!out.some((c) => c.value === value)) {
    const label = `${current.provider || 'default provider'} / ${current.model || 'default model'} (not offered by the code-agent server)`;
    out.push({ value, provider: current.provider, model: current.model, label, group: 'Set in the settings' });
  }
  return out;
}

/** The provider and model settings of the user's layer (what the cell actions send). */
export function currentChoice(user: Readonly<Record<string, unknown>> | null | undefined): { provider: string; model: string } {
  return { provider: str(user?.codeagentProvider), model: str(user?.codeagentModel) };
}
