import { useMemo } from 'react';
import { api, type Member } from './api/client';
import { useLoad } from './load';
import { loadPages } from './paging';

/** Every member of a workspace (up to LIST_MAX_PAGES pages), for `useLoad`. */
export const loadMembers = (ws: string) => loadPages((page) => api.GET('/api/v1/workspaces/{ws}/members', { params: { path: { ws }, query: page } }));

/** A workspace's members by user id; null until they are loaded (or when they cannot be). */
export type Members = ReadonlyMap<string, Member> | null;

/**
 * The members of a workspace, which every member may read (decision 0225): the names behind the
 * user ids the API gives for who changed a file, deleted it, or started a run.
 */
export function useMembers(ws: string): Members {
  const members = useLoad(() => loadMembers(ws), [ws]);
  const items = members.data?.items;
  return useMemo(() => (items === undefined ? null : new Map(items.map((m) => [m.user_id, m]))), [items]);
}

/** How a member is named: their name, else their e-mail. */
export const memberName = (m: Pick<Member, 'name' | 'email'>): string => m.name.trim() || m.email;

/**
 * " by Alice" after a time, `lead` before it ("made by Alice"): the member's name (their e-mail on
 * hover), "by a former member" for a user no longer in the workspace; nothing at all (the lead
 * neither) while the members load, or for no user (one since deleted, or the platform itself).
 */
export function By({ id, members, lead = '' }: { id: string | null | undefined; members: Members; lead?: string }) {
  if (id === null || id === undefined || members === null) return null;
  const m = members.get(id);
  return m === undefined ? (
    <span className="by muted">{lead} by a former member</span>
  ) : (
    <span className="by muted" title={m.email}>
      {lead} by {memberName(m)}
    </span>
  );
}
