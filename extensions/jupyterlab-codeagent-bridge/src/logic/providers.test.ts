import { describe, expect, it } from 'vitest';
import { choiceValue, currentChoice, modelChoices, parseChoiceValue, parseProviders, SERVER_DEFAULT } from './providers';

// The bridge's answer (docs/contract/spec.md §9.2), as the fake code agent of the browser test produces it.
const BODY = {
  providers: [
    {
      id: 'fake',
      name: 'Fake',
      models: [
        { id: 'fake-1', name: 'Fake One' },
        { id: 'fake-2', name: 'Fake Two' },
      ],
    },
    { id: 'org/lab', name: '', models: [{ id: 'm/1', name: '' }] },
  ],
  default: { fake: 'fake-2' },
};

describe('parseProviders', () => {
  it('keeps ids and names, falling back to the id for a missing name', () => {
    expect(parseProviders(BODY)).toEqual({
      providers: [
        {
          id: 'fake',
          name: 'Fake',
          models: [
            { id: 'fake-1', name: 'Fake One' },
            { id: 'fake-2', name: 'Fake Two' },
          ],
        },
        { id: 'org/lab', name: 'org/lab', models: [{ id: 'm/1', name: 'm/1' }] },
      ],
      default: { fake: 'fake-2' },
    });
  });
  it('drops malformed entries instead of failing', () => {
    expect(parseProviders(null)).toEqual({ providers: [], default: {} });
    expect(parseProviders({ providers: [{ name: 'no id' }, 7, { id: 'p', models: [{}, { id: 'm' }] }], default: { p: 3, q: 'x' } })).toEqual({
      providers: [{ id: 'p', name: 'p', models: [{ id: 'm', name: 'm' }] }],
      default: { q: 'x' },
    });
  });
});

describe('modelChoices', () => {
  const list = parseProviders(BODY);
  it('offers the server default first, then each model grouped by provider, the default model marked', () => {
    const choices = modelChoices(list, { provider: '', model: '' });
    expect(choices[0]).toEqual(SERVER_DEFAULT);
    expect(choices.slice(1).map((c) => [c.group, c.label, c.provider, c.model])).toEqual([
      ['Fake', 'Fake One', 'fake', 'fake-1'],
      ['Fake', 'Fake Two (default)', 'fake', 'fake-2'],
      ['org/lab', 'm/1', 'org/lab', 'm/1'],
    ]);
  });
  it('keeps a setting the server does not offer visible, marked, rather than showing another model', () => {
    const choices = modelChoices(list, { provider: 'gone', model: 'old' });
    expect(choices.at(-1)).toMatchObject({ provider: 'gone', model: 'old', group: 'Set in the settings', value: choiceValue('gone', 'old') });
    expect(choices.at(-1)!.label).toMatch(/not offered/);
    expect(modelChoices(list, { provider: 'fake', model: 'fake-1' })).toHaveLength(4);
  });
});

describe('choice values', () => {
  it('round-trip ids holding slashes; the empty value is the server default', () => {
    expect(parseChoiceValue(choiceValue('org/lab', 'm/1'))).toEqual({ provider: 'org/lab', model: 'm/1' });
    expect(choiceValue('', '')).toBe('');
    expect(parseChoiceValue('')).toEqual({ provider: '', model: '' });
    expect(parseChoiceValue('{"x":1}')).toEqual({ provider: '', model: '' });
  });
  it('reads the current choice from the user layer only', () => {
    expect(currentChoice({ codeagentProvider: 'fake', codeagentModel: 'fake-1' })).toEqual({ provider: 'fake', model: 'fake-1' });
    expect(currentChoice({ codeagentModel: 3 })).toEqual({ provider: '', model: '' });
    expect(currentChoice(null)).toEqual({ provider: '', model: '' });
  });
});
