import type { Me, Member } from '../api/client';
import { ErrorText, formatTime, Link } from '../components';
import { useLoad } from '../load';
import { loadMembers, memberName } from '../members';
import { WorkspaceHeader } from './workspace';

const ROLE_ORDER = { admin: 0, editor: 1, viewer: 2 } as const;

/**
 * Who is in the workspace, with their roles (decision 0225): every member sees it, so that they
 * know whom a change came from and whom to ask. Only system administrators change members
 * (docs/contract/spec.md §4.2): they get a link to the administration.
 */
export function MembersPage({ me, ws }: { me: Me; ws: string }) {
  const list = useLoad(() => loadMembers(ws), [ws]);
  const members = list.data?.items ?? null;
  const sorted = members === null ? null : [...members].sort((a, b) => ROLE_ORDER[a.role] - ROLE_ORDER[b.role] || memberName(a).localeCompare(memberName(b)));
  return (
    <section>
      <WorkspaceHeader me={me} ws={ws} current="members" />
      <h2>Members</h2>
      <p className="muted">
        Admins and editors change files, runs and schedules; viewers read them.{' '}
        {me.is_system_admin ? (
          <>
            Add members and change roles under <Link to="/manage">Administration</Link>.
          </>
        ) : (
          'To be added to a workspace or to get another role, ask a system administrator.'
        )}
      </p>
      <ErrorText error={list.error} />
      {sorted === null && !list.error ? <p aria-busy="true">Loading…</p> : null}
      {list.data?.complete === false ? (
        <p className="muted" role="note">
          The workspace has more than {list.data.items.length.toLocaleString()} members: only those are listed here.
        </p>
      ) : null}
      {sorted && sorted.length > 0 ? (
        <table className="listing">
          <caption className="visually-hidden">Members of the workspace</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">E-mail</th>
              <th scope="col">Role</th>
              <th scope="col">Member since</th>
            </tr>
          </thead>
          <tbody>
            {sorted.map((m: Member) => (
              <tr key={m.user_id}>
                <td>
                  {memberName(m)}
                  {m.user_id === me.id ? <span className="muted"> (you)</span> : null}
                </td>
                <td>{m.email}</td>
                <td>{m.role}</td>
                <td>{formatTime(m.created_at)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </section>
  );
}
