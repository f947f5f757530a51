/**
 * The life of one proposal on one cell: at most one at a time, tied to the source it was made
 * for. A proposal whose cell changed meanwhile is stale and must not be applied (it would undo
 * the user's edit); a new request discards the pending proposal first (never a diff of a diff).
 */
export interface Proposal {
  /** Source of the cell when the request was sent. */
  original: string;
  /** Source proposed by the code agent. */
  proposed: string;
  explanation: string;
}

export type ProposalState = { kind: 'idle' } | { kind: 'waiting'; original: string; requestId: number } | { kind: 'pending'; proposal: Proposal };

export class ProposalTracker {
  private state: ProposalState = { kind: 'idle' };
  private nextId = 1;

  get current(): ProposalState {
    return this.state;
  }

  /** A request starts: any pending proposal is discarded. Returns the request's id. */
  start(original: string): number {
    const requestId = this.nextId++;
    this.state = { kind: 'waiting', original, requestId };
    return requestId;
  }

  /**
   * The answer arrived. Returns the proposal to show, or a reason it is not shown: `superseded`
   * (another request or a cancel came in between) or `stale` (the cell was edited meanwhile).
   */
  receive(requestId: number, proposed: string, explanation: string, currentSource: string): { proposal: Proposal } | { discarded: 'superseded' | 'stale' } {
    if (this.state.kind !== 'waiting' || this.state.requestId !== requestId) return { discarded: 'superseded' };
    const original = this.state.original;
    if (currentSource !== original) {
      this.state = { kind: 'idle' };
      return { discarded: 'stale' };
    }
    const proposal = { original, proposed, explanation };
    this.state = { kind: 'pending', proposal };
    return { proposal };
  }

  /** The cell's source changed: true when this made the pending proposal stale (it is dropped). */
  sourceChanged(currentSource: string): boolean {
    if (this.state.kind === 'pending' && currentSource !== this.state.proposal.original) {
      this.state = { kind: 'idle' };
      return true;
    }
    return false;
  }

  /** Accept: returns the source to write, or null when nothing (valid) is pending. */
  accept(currentSource: string): string | null {
    if (this.state.kind !== 'pending') return null;
    const { original, proposed } = this.state.proposal;
    this.state = { kind: 'idle' };
    return currentSource === original ? proposed : null;
  }

  /** Reject, cancel or failure: back to idle. */
  reset(): void {
    this.state = { kind: 'idle' };
  }
}
