import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { SETTING_DEFAULTS } from './settings';

const schema = JSON.parse(readFileSync(new URL('../../schema/plugin.json', import.meta.url), 'utf8')) as {
  type: string;
  additionalProperties: boolean;
  properties: Record<string, { type: string; default: unknown; minimum?: number; maximum?: number }>;
  'jupyter.lab.shortcuts': unknown;
  'jupyter.lab.toolbars': Record<string, { name: string; rank: number }[]>;
};

// docs/contract/seed.md §2.1, field for field.
const SEED_2_1 = {
  codeagentServerUrl: { type: 'string', default: 'http://127.0.0.1:4096' },
  codeagentServerUser: { type: 'string', default: 'codeagent' },
  codeagentServerPassword: { type: 'string', default: '' },
  codeagentProvider: { type: 'string', default: '' },
  codeagentModel: { type: 'string', default: '' },
  requestTimeoutSeconds: { type: 'integer', default: 120, minimum: 5, maximum: 600 },
};

describe('schema/plugin.json equals docs/contract/seed.md §2.1', () => {
  it('has exactly the six fields, with their types, defaults and limits', () => {
    expect(Object.keys(schema.properties).sort()).toEqual(Object.keys(SEED_2_1).sort());
    for (const [name, want] of Object.entries(SEED_2_1)) {
      const got = schema.properties[name]!;
      expect({ name, type: got.type, default: got.default, minimum: got.minimum, maximum: got.maximum }).toEqual({
        name,
        minimum: undefined,
        maximum: undefined,
        ...want,
      });
    }
  });
  it('accepts no other property, declares no shortcuts, the Cell toolbar item and the Notebook toolbar model picker', () => {
    expect(schema.type).toBe('object');
    expect(schema.additionalProperties).toBe(false);
    expect(schema['jupyter.lab.shortcuts']).toEqual([]);
    expect(schema['jupyter.lab.toolbars'].Cell).toEqual([{ name: 'codeagent-cell-actions', rank: 100 }]);
    expect(schema['jupyter.lab.toolbars'].Notebook).toEqual([{ name: 'codeagent-model', rank: 990 }]);
  });
  it('agrees with the defaults the code uses', () => {
    for (const [name, value] of Object.entries(SETTING_DEFAULTS)) expect(schema.properties[name]!.default).toEqual(value);
  });
});
