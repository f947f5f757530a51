import type { Me } from '../api/client';
import { Link } from '../components';
import { filesPath } from '../router';
import { jupyterPath } from '../nav';

export type Role = 'admin' | 'editor' | 'viewer';

/** The caller's role in the workspace (undefined: not a member, the API answers 404). */
export function roleIn(me: Me, ws: string): Role | undefined {
  return me.workspaces.find((w) => w.id === ws)?.role;
}

export const canWrite = (role: Role | undefined) => role === 'admin' || role === 'editor';

/** The workspace's name and its tabs. */
export function WorkspaceHeader({ me, ws, current }: { me: Me; ws: string; current: 'files' | 'trash' | 'runs' | 'members' }) {
  const w = me.workspaces.find((x) => x.id === ws);
  const tabs = [
    { key: 'files', label: 'Files', to: filesPath(ws) },
    { key: 'runs', label: 'Runs', to: `/workspaces/${encodeURIComponent(ws)}/runs` },
    { key: 'trash', label: 'Trash', to: `/workspaces/${encodeURIComponent(ws)}/trash` },
    { key: 'members', label: 'Members', to: `/workspaces/${encodeURIComponent(ws)}/members` },
  ];
  return (
    <div className="ws-header">
      <h1>{w?.name ?? 'Workspace'}</h1>
      {w ? (
        <p className="muted">
          Your role: <strong>{w.role}</strong>
        </p>
      ) : (
        <p className="error" role="alert">
          You are not a member of this workspace. Ask one of its admins to add you.
        </p>
      )}
      <nav aria-label="Workspace" className="tabs">
        {tabs.map((t) => (
          <Link key={t.key} to={t.to} aria-current={t.key === current ? 'page' : undefined}>
            {t.label}
          </Link>
        ))}
        <a href={jupyterPath(ws)}>Open in JupyterLab</a>
      </nav>
    </div>
  );
}
