/** The six user settings of the extension (docs/contract/seed.md §2.1, docs/contract/spec.md §9.1). */
export interface BridgeSettings {
  codeagentServerUrl: string;
  codeagentServerUser: string;
  codeagentServerPassword: string;
  codeagentProvider: string;
  codeagentModel: string;
  requestTimeoutSeconds: number;
}

export const SETTING_DEFAULTS: Readonly<BridgeSettings> = Object.freeze({
  codeagentServerUrl: 'http://127.0.0.1:4096',
  codeagentServerUser: 'codeagent',
  codeagentServerPassword: '',
  codeagentProvider: '',
  codeagentModel: '',
  requestTimeoutSeconds: 120,
});

export const TIMEOUT_MIN_SECONDS = 5;
export const TIMEOUT_MAX_SECONDS = 600;

const STRING_FIELDS = ['codeagentServerUrl', 'codeagentServerUser', 'codeagentServerPassword', 'codeagentProvider', 'codeagentModel'] as const;

/**
 * The settings the user set explicitly (the "user" layer of JupyterLab's settings, not the
 * defaults), limited to the six known fields with the right types. Only these are sent to the
 * bridge, so that the server's own environment (e.g. CODEAGENT_BRIDGE_URL) still applies
 * where the user set nothing. A value equal to its default counts as not set: the Settings
 * Editor writes every field it shows into the user layer when any one is edited, and sending
 * the default URL would override the server's CODEAGENT_BRIDGE_URL (and be refused).
 */
export function explicitSettings(user: Readonly<Record<string, unknown>> | null | undefined): Partial<BridgeSettings> {
  const out: Partial<BridgeSettings> = {};
  if (!user) return out;
  for (const key of STRING_FIELDS) {
    const v = user[key];
    if (typeof v === 'string' && v !== SETTING_DEFAULTS[key]) out[key] = v;
  }
  const t = user.requestTimeoutSeconds;
  if (typeof t === 'number' && Number.isInteger(t) && t >= TIMEOUT_MIN_SECONDS && t <= TIMEOUT_MAX_SECONDS && t !== SETTING_DEFAULTS.requestTimeoutSeconds) {
    out.requestTimeoutSeconds = t;
  }
  return out;
}

/** The time-out in effect: the composite (user over default) value, clamped to 5–600 s. */
export function timeoutSeconds(composite: Readonly<Record<string, unknown>> | null | undefined): number {
  const t = composite?.requestTimeoutSeconds;
  if (typeof t !== 'number' || !Number.isFinite(t)) return SETTING_DEFAULTS.requestTimeoutSeconds;
  return Math.min(TIMEOUT_MAX_SECONDS, Math.max(TIMEOUT_MIN_SECONDS, Math.round(t)));
}
