import type { Me } from '../api/client';
import { Link } from '../components';
import { filesPath } from '../router';
import { jupyterPath } from '../nav';

export function HomePage({ me }: { me: Me }) {
  return (
    <section>
      <h1>My workspaces</h1>
      {me.workspaces.length === 0 ? (
        <p className="empty">
          You are not a member of any workspace yet.{' '}
          {me.is_system_admin ? (
            <>
              Create one in <Link to="/manage">Administration</Link>.
            </>
          ) : (
            'Ask a system administrator to add you to one.'
          )}
        </p>
      ) : (
        <ul className="cards">
          {me.workspaces.map((w) => (
            <li key={w.id} className="card">
              <h2>
                <Link to={filesPath(w.id)}>{w.name}</Link>
              </h2>
              <p>
                Your role: <strong className={`role role-${w.role}`}>{w.role}</strong>
              </p>
              <p className="actions">
                <Link to={filesPath(w.id)}>Files</Link>
                <Link to={`/workspaces/${encodeURIComponent(w.id)}/runs`}>Runs</Link>
                <a href={jupyterPath(w.id)}>Open in JupyterLab</a>
              </p>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
