import { describe, expect, it } from 'vitest';
import { ProposalTracker } from './proposal';

describe('ProposalTracker (answer application)', () => {
  it('shows the answer for the source it was asked about, and accept returns the new source once', () => {
    const t = new ProposalTracker();
    const id = t.start('1/0');
    const out = t.receive(id, '1/1', 'fixed', '1/0');
    expect(out).toEqual({ proposal: { original: '1/0', proposed: '1/1', explanation: 'fixed' } });
    expect(t.accept('1/0')).toBe('1/1');
    expect(t.accept('1/0')).toBeNull();
    expect(t.current.kind).toBe('idle');
  });

  it('discards an answer when the cell was edited while waiting', () => {
    const t = new ProposalTracker();
    const id = t.start('1/0');
    expect(t.receive(id, '1/1', '', '1/0  # edited')).toEqual({ discarded: 'stale' });
    expect(t.current.kind).toBe('idle');
  });

  it('drops a pending proposal when the cell changes, and never applies it afterwards', () => {
    const t = new ProposalTracker();
    t.receive(t.start('a'), 'b', '', 'a');
    expect(t.sourceChanged('a')).toBe(false);
    expect(t.sourceChanged('ax')).toBe(true);
    expect(t.accept('ax')).toBeNull();
  });

  it('refuses to apply when the source differs at accept time (no overwrite of user edits)', () => {
    const t = new ProposalTracker();
    t.receive(t.start('a'), 'b', '', 'a');
    expect(t.accept('changed')).toBeNull();
  });

  it('a new request supersedes the pending proposal and any older answer still in flight', () => {
    const t = new ProposalTracker();
    const first = t.start('a');
    t.receive(first, 'b', '', 'a');
    const second = t.start('a');
    expect(t.current).toEqual({ kind: 'waiting', original: 'a', requestId: second });
    expect(t.receive(first, 'old', '', 'a')).toEqual({ discarded: 'superseded' });
    expect(t.receive(second, 'c', '', 'a')).toEqual({ proposal: { original: 'a', proposed: 'c', explanation: '' } });
  });

  it('reject resets', () => {
    const t = new ProposalTracker();
    t.receive(t.start('a'), 'b', '', 'a');
    t.reset();
    expect(t.current.kind).toBe('idle');
  });
});
