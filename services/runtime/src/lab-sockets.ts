import type { Duplex } from 'node:stream';
import type { FastifyBaseLogger } from 'fastify';

/**
 * After a change of a user, their websockets end at once and again this long after, and never more
 * often (decision 0259): one that the ingress let in just before the change but that reached the
 * runtime after it, or whose reconnection an ingress checked before its backend heard of the
 * change, ends too; and changes made in a loop (a workspace admin adding and removing a member)
 * end that user's websockets once a second at most.
 */
export const CLOSE_AGAIN_MS = 1000;

/** What follows the users' changes (user-changes.ts) asks of the open websockets. */
export interface FollowedSockets {
  /** `userId`'s sessions, record or memberships changed: their websockets end. */
  userChanged(userId: string): void;
  /** The workspaces with open websockets. */
  workspaces(): string[];
  /** These workspaces are gone: their websockets end. */
  endWorkspaces(ids: readonly string[]): void;
  /** Changes may have been missed: every websocket ends. */
  endAll(): void;
}

/**
 * The lab's open websockets of the users the ingress named, by user and workspace, and the
 * changes heard of (decision 0259): a request whose body arrives while its user changes is cut
 * off before its last chunk (`unchangedSince`).
 */
export class LabSockets implements FollowedSockets {
  private readonly open = new Map<Duplex, { user: string; workspace: string }>();
  /** Users whose websockets ended less than `gapMs` ago; `more`: changed again since. */
  private readonly ending = new Map<string, { more: boolean }>();
  /** A count of the changes heard of, and when (by that count) each user and workspace last changed. */
  private epoch = 0;
  private everyone = 0;
  private readonly changed = new Map<string, number>();

  constructor(
    private readonly log: FastifyBaseLogger,
    private readonly gapMs = CLOSE_AGAIN_MS,
  ) {}

  add(socket: Duplex, user: string, workspace: string): void {
    this.open.set(socket, { user: user.toLowerCase(), workspace: workspace.toLowerCase() });
    socket.once('close', () => this.open.delete(socket));
  }

  /** The count of changes heard of so far: what `unchangedSince` compares with. */
  stamp(): number {
    return this.epoch;
  }

  /** Whether nothing was heard of `user`, of `workspace` being gone, or of lost changes, since `stamp`. */
  unchangedSince(user: string, workspace: string, stamp: number): boolean {
    return this.everyone <= stamp && (this.changed.get(user.toLowerCase()) ?? 0) <= stamp && (this.changed.get(workspace.toLowerCase()) ?? 0) <= stamp;
  }

  userChanged(userId: string): void {
    const user = userId.toLowerCase();
    this.changed.set(user, ++this.epoch);
    const pending = this.ending.get(user);
    if (pending) {
      pending.more = true;
      return;
    }
    const state = { more: false };
    this.ending.set(user, state);
    const ended = this.end((s) => s.user === user);
    if (ended > 0)
      this.log.info(
        { user_id: user, websockets: ended },
        "a user's sessions or memberships changed: their lab websockets ended (the ingress checks the reconnection)",
      );
    const again = () => {
      this.end((s) => s.user === user);
      if (!state.more) return void this.ending.delete(user);
      state.more = false;
      setTimeout(again, this.gapMs).unref();
    };
    setTimeout(again, this.gapMs).unref();
  }

  workspaces(): string[] {
    return [...new Set([...this.open.values()].map((s) => s.workspace))];
  }

  endWorkspaces(ids: readonly string[]): void {
    const gone = new Set(ids.map((id) => id.toLowerCase()));
    for (const id of gone) this.changed.set(id, ++this.epoch);
    const ended = this.end((s) => gone.has(s.workspace));
    if (ended > 0) this.log.info({ workspaces: [...gone], websockets: ended }, 'workspaces were deleted: their lab websockets ended');
  }

  endAll(): void {
    this.everyone = ++this.epoch;
    const ended = this.end(() => true);
    if (ended > 0)
      this.log.info({ websockets: ended }, 'changes of users may have been missed: every lab websocket ended (the ingress checks the reconnections)');
  }

  private end(which: (s: { user: string; workspace: string }) => boolean): number {
    let ended = 0;
    for (const [socket, s] of this.open) {
      if (!which(s)) continue;
      socket.destroy();
      this.open.delete(socket);
      ended++;
    }
    return ended;
  }
}
