import { useState, type FormEvent } from 'react';
import { api, describeError, type Me, type Member, type User, type Workspace } from '../api/client';
import { ErrorText, formatTime, MoreThan } from '../components';
import { useLoad } from '../load';
import { loadPages } from '../paging';

type Role = Member['role'];
const ROLES: Role[] = ['admin', 'editor', 'viewer'];

/** Platform administration: shown to system administrators only (the API refuses others with 403 anyway). */
export function ManagePage({ me }: { me: Me }) {
  const [selected, setSelected] = useState<string | null>(null);
  const [showDeleted, setShowDeleted] = useState(false);
  // Every page of each list (up to LIST_MAX_PAGES): a user or workspace past the first page is
  // listed, and can be made a member, like the others.
  const userList = useLoad(() => loadPages((page) => api.GET('/api/v1/platform/users', { params: { query: page } })), []);
  const workspaceList = useLoad(
    () => loadPages((page) => api.GET('/api/v1/platform/workspaces', { params: { query: { ...page, include_deleted: showDeleted } } })),
    [showDeleted],
  );
  const users = userList.data?.items ?? [];
  const workspaces = workspaceList.data?.items ?? [];
  // A change reloads both lists (a membership changes a workspace's member count).
  const reload = async () => {
    await Promise.all([userList.reload(), workspaceList.reload()]);
  };
  const members = workspaces.find((w) => w.id === selected && !w.deleted_at);

  return (
    <section>
      <h1>Administration</h1>
      <div className="grid2">
        <Users users={users} allListed={userList.data?.complete !== false} loadError={userList.error} me={me} onChange={reload} />
        <Workspaces
          workspaces={workspaces}
          allListed={workspaceList.data?.complete !== false}
          loadError={workspaceList.error}
          selected={selected}
          onSelect={setSelected}
          onChange={reload}
          showDeleted={showDeleted}
          onShowDeleted={setShowDeleted}
        />
      </div>
      {members ? <Members key={members.id} ws={members} users={users} allUsers={userList.data?.complete !== false} onChange={reload} /> : null}
    </section>
  );
}

function Users({
  users,
  allListed,
  loadError,
  me,
  onChange,
}: {
  users: User[];
  allListed: boolean;
  loadError: string | null;
  me: Me;
  onChange: () => Promise<void>;
}) {
  const [form, setForm] = useState({ email: '', name: '', password: '', admin: false });
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);

  const create = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    setNotice(null);
    const { error: err } = await api.POST('/api/v1/platform/users', {
      body: { email: form.email, name: form.name, password: form.password, ...(form.admin ? { platform_role_id: 'admin' } : {}) },
    });
    if (err) setError((err as { error?: string }).error === 'conflict' ? 'A user with this email exists already.' : describeError(err));
    else {
      setNotice(`Created ${form.email}.`);
      setForm({ email: '', name: '', password: '', admin: false });
      await onChange();
    }
  };

  const [resetFor, setResetFor] = useState<string | null>(null);
  const [newPassword, setNewPassword] = useState('');

  const resetPassword = async (e: FormEvent, u: User) => {
    e.preventDefault();
    setError(null);
    const { error: err } = await api.POST('/api/v1/platform/users/{id}/password', { params: { path: { id: u.id } }, body: { password: newPassword } });
    if (err) setError(describeError(err));
    else {
      setNotice(`New password set for ${u.email}; their sessions were ended.`);
      setResetFor(null);
      setNewPassword('');
    }
  };

  // What goes wrong with a row's action is said on that row.
  const [rowError, setRowError] = useState<{ id: string; message: string } | null>(null);
  const act = async (u: User, done: string, call: () => Promise<{ error?: unknown }>) => {
    setRowError(null);
    setNotice(null);
    const { error: err } = await call();
    if (err) setRowError({ id: u.id, message: describeError(err) });
    else setNotice(done);
    await onChange();
  };
  const setDisabled = (u: User, disabled: boolean) =>
    act(u, `${disabled ? 'Disabled' : 'Enabled'} ${u.email}${disabled ? '; their sessions were ended' : ''}.`, () =>
      api.PATCH('/api/v1/platform/users/{id}', { params: { path: { id: u.id } }, body: { disabled } }),
    );
  const setAdmin = (u: User, admin: boolean) => {
    const question = admin
      ? `Make ${u.email} a system administrator? They can then manage every user and workspace.`
      : `Make ${u.email} a user? They lose the administration.`;
    if (!window.confirm(question)) return;
    return act(u, `${u.email} is now ${admin ? 'a system administrator' : 'a user'}.`, () =>
      api.PATCH('/api/v1/platform/users/{id}', { params: { path: { id: u.id } }, body: { platform_role_id: admin ? 'admin' : 'user' } }),
    );
  };
  const remove = (u: User) => {
    if (!window.confirm(`Delete the user ${u.email}? Their sessions end and their memberships are removed; the files they wrote stay.`)) return;
    return act(u, `Deleted ${u.email}.`, () => api.DELETE('/api/v1/platform/users/{id}', { params: { path: { id: u.id } } }));
  };

  return (
    <div>
      <h2>Users</h2>
      <ErrorText error={loadError} />
      <form className="stack" onSubmit={(e) => void create(e)} aria-label="Create user">
        <label>
          Email
          <input type="email" required value={form.email} onChange={(e) => setForm({ ...form, email: e.target.value })} />
        </label>
        <label>
          Name
          <input required value={form.name} onChange={(e) => setForm({ ...form, name: e.target.value })} />
        </label>
        <label>
          Password
          <input
            type="password"
            required
            minLength={8}
            autoComplete="new-password"
            value={form.password}
            onChange={(e) => setForm({ ...form, password: e.target.value })}
          />
        </label>
        <label className="inline">
          <input type="checkbox" checked={form.admin} onChange={(e) => setForm({ ...form, admin: e.target.checked })} /> System administrator
        </label>
        <ErrorText error={error} />
        {notice ? <p role="status">{notice}</p> : null}
        <button type="submit">Create user</button>
      </form>
      {allListed ? null : <MoreThan count={users.length} what="users" order="by creation" />}
      <table className="listing">
        <caption className="visually-hidden">Users</caption>
        <thead>
          <tr>
            <th scope="col">Email</th>
            <th scope="col">Role</th>
            <th scope="col">State</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {users.map((u) => (
            <tr key={u.id}>
              <td>
                {u.email}
                <div className="muted">{u.name}</div>
              </td>
              <td>{u.is_system_admin ? 'system admin' : u.platform_role_id}</td>
              <td>{u.disabled_at ? `disabled ${formatTime(u.disabled_at)}` : 'active'}</td>
              <td className="actions">
                {u.id === me.id ? null : (
                  <>
                    <button
                      type="button"
                      className="link"
                      onClick={() => void setDisabled(u, !u.disabled_at)}
                      aria-label={`${u.disabled_at ? 'Enable' : 'Disable'} ${u.email}`}
                    >
                      {u.disabled_at ? 'Enable' : 'Disable'}
                    </button>
                    <button
                      type="button"
                      className="link"
                      onClick={() => setResetFor(resetFor === u.id ? null : u.id)}
                      aria-expanded={resetFor === u.id}
                      aria-label={`Reset password of ${u.email}`}
                    >
                      Reset password
                    </button>
                    <button
                      type="button"
                      className="link"
                      onClick={() => void setAdmin(u, !u.is_system_admin)}
                      aria-label={`${u.is_system_admin ? 'Make user' : 'Make system admin'}: ${u.email}`}
                    >
                      {u.is_system_admin ? 'Make user' : 'Make system admin'}
                    </button>
                    <button type="button" className="link danger" onClick={() => void remove(u)} aria-label={`Delete ${u.email}`}>
                      Delete
                    </button>
                  </>
                )}
                {rowError?.id === u.id ? <ErrorText error={rowError.message} /> : null}
                {resetFor === u.id ? (
                  <form className="toolbar" onSubmit={(e) => void resetPassword(e, u)} aria-label={`New password for ${u.email}`}>
                    <label>
                      New password
                      <input
                        type="password"
                        required
                        minLength={8}
                        autoComplete="new-password"
                        value={newPassword}
                        onChange={(e) => setNewPassword(e.target.value)}
                      />
                    </label>
                    <button type="submit">Set password</button>
                  </form>
                ) : null}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function Workspaces({
  workspaces,
  allListed,
  loadError,
  selected,
  onSelect,
  onChange,
  showDeleted,
  onShowDeleted,
}: {
  workspaces: Workspace[];
  allListed: boolean;
  loadError: string | null;
  selected: string | null;
  onSelect: (id: string) => void;
  onChange: () => Promise<void>;
  showDeleted: boolean;
  onShowDeleted: (v: boolean) => void;
}) {
  const [name, setName] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [renaming, setRenaming] = useState<{ id: string; name: string } | null>(null);
  const [rowError, setRowError] = useState<{ id: string; message: string } | null>(null);

  const create = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    const { data, error: err } = await api.POST('/api/v1/platform/workspaces', { body: { name } });
    if (err) setError(describeError(err));
    else {
      setName('');
      await onChange();
      onSelect(data.id);
    }
  };

  const rename = async (e: FormEvent) => {
    e.preventDefault();
    if (!renaming) return;
    setRowError(null);
    const { error: err } = await api.PATCH('/api/v1/platform/workspaces/{id}', { params: { path: { id: renaming.id } }, body: { name: renaming.name } });
    if (err) setRowError({ id: renaming.id, message: describeError(err) });
    else {
      setRenaming(null);
      await onChange();
    }
  };

  const remove = async (w: Workspace) => {
    setRowError(null);
    if (!window.confirm(`Delete the workspace ${w.name}? Its members lose access; its files stay stored.`)) return;
    const { error: err } = await api.DELETE('/api/v1/platform/workspaces/{id}', { params: { path: { id: w.id } } });
    if (err) setRowError({ id: w.id, message: describeError(err) });
    await onChange();
  };

  return (
    <div>
      <h2>Workspaces</h2>
      <ErrorText error={loadError} />
      <form className="stack" onSubmit={(e) => void create(e)} aria-label="Create workspace">
        <label>
          Name
          <input required value={name} onChange={(e) => setName(e.target.value)} />
        </label>
        <ErrorText error={error} />
        <button type="submit">Create workspace</button>
      </form>
      <label className="inline">
        <input type="checkbox" checked={showDeleted} onChange={(e) => onShowDeleted(e.target.checked)} /> Show deleted workspaces
      </label>
      {workspaces.length === 0 ? <p className="empty">No workspaces yet: create the first one above.</p> : null}
      {allListed ? null : <MoreThan count={workspaces.length} what="workspaces" order="by creation" />}
      <ul className="plain">
        {workspaces.map((w) => (
          <li key={w.id}>
            {w.deleted_at ? (
              <span>
                {w.name} <span className="muted">(deleted {formatTime(w.deleted_at)})</span>
              </span>
            ) : renaming?.id === w.id ? (
              <form className="toolbar" onSubmit={(e) => void rename(e)} aria-label={`Rename ${w.name}`}>
                <label>
                  New name
                  <input required value={renaming.name} onChange={(e) => setRenaming({ id: w.id, name: e.target.value })} />
                </label>
                <button type="submit">Save</button>
                <button type="button" className="secondary" onClick={() => setRenaming(null)}>
                  Cancel
                </button>
              </form>
            ) : (
              <>
                <button type="button" className="link" aria-pressed={selected === w.id} onClick={() => onSelect(w.id)}>
                  {w.name}
                </button>{' '}
                <span className="muted">
                  {w.member_count} {w.member_count === 1 ? 'member' : 'members'}
                </span>{' '}
                <button type="button" className="link" onClick={() => setRenaming({ id: w.id, name: w.name })} aria-label={`Rename ${w.name}`}>
                  Rename
                </button>{' '}
                <button type="button" className="link danger" onClick={() => void remove(w)} aria-label={`Delete ${w.name}`}>
                  Delete
                </button>
              </>
            )}
            {rowError?.id === w.id ? <ErrorText error={rowError.message} /> : null}
          </li>
        ))}
      </ul>
    </div>
  );
}

function Members({ ws, users, allUsers, onChange }: { ws: Workspace; users: User[]; allUsers: boolean; onChange: () => Promise<void> }) {
  const list = useLoad(
    () => loadPages((page) => api.GET('/api/v1/platform/workspaces/{id}/members', { params: { path: { id: ws.id }, query: page } })),
    [ws.id],
  );
  const members = list.data?.items ?? [];
  const [userId, setUserId] = useState('');
  const [role, setRole] = useState<Role>('editor');
  const [error, setError] = useState<string | null>(null);
  const [rowError, setRowError] = useState<{ id: string; message: string } | null>(null);
  const candidates = users.filter((u) => !members.some((m) => m.user_id === u.id));

  const add = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    const { error: err } = await api.POST('/api/v1/platform/workspaces/{id}/members', {
      params: { path: { id: ws.id } },
      body: { user_id: userId || candidates[0]?.id || '', role },
    });
    if (err) setError((err as { error?: string }).error === 'conflict' ? 'This user is a member already.' : describeError(err));
    else {
      setUserId('');
      await list.reload();
      await onChange();
    }
  };

  const change = async (m: Member, newRole: Role | null) => {
    setRowError(null);
    const { error: err } =
      newRole === null
        ? await api.DELETE('/api/v1/platform/workspaces/{id}/members/{user_id}', { params: { path: { id: ws.id, user_id: m.user_id } } })
        : await api.PATCH('/api/v1/platform/workspaces/{id}/members/{user_id}', {
            params: { path: { id: ws.id, user_id: m.user_id } },
            body: { role: newRole },
          });
    if (err) setRowError({ id: m.user_id, message: describeError(err) });
    await list.reload();
    await onChange();
  };

  return (
    <div>
      <h2>Members of {ws.name}</h2>
      {candidates.length > 0 ? (
        <form className="toolbar" onSubmit={(e) => void add(e)} aria-label="Add member">
          <label>
            User
            <select value={userId || candidates[0]?.id} onChange={(e) => setUserId(e.target.value)}>
              {candidates.map((u) => (
                <option key={u.id} value={u.id}>
                  {u.email}
                </option>
              ))}
            </select>
          </label>
          <label>
            Role
            <select value={role} onChange={(e) => setRole(e.target.value as Role)}>
              {ROLES.map((r) => (
                <option key={r} value={r}>
                  {r}
                </option>
              ))}
            </select>
          </label>
          <button type="submit">Add member</button>
        </form>
      ) : allUsers ? (
        <p className="muted">Every user is a member already.</p>
      ) : null}
      {list.data?.complete === false ? <MoreThan count={members.length} what="members" order="by when they joined" /> : null}
      <ErrorText error={list.error ?? error} />
      <table className="listing">
        <caption className="visually-hidden">Members of {ws.name}</caption>
        <thead>
          <tr>
            <th scope="col">Member</th>
            <th scope="col">Role</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {members.map((m) => (
            <tr key={m.user_id}>
              <td>
                {m.email}
                {rowError?.id === m.user_id ? <ErrorText error={rowError.message} /> : null}
              </td>
              <td>
                <select aria-label={`Role of ${m.email}`} value={m.role} onChange={(e) => void change(m, e.target.value as Role)}>
                  {ROLES.map((r) => (
                    <option key={r} value={r}>
                      {r}
                    </option>
                  ))}
                </select>
              </td>
              <td className="actions">
                <button type="button" className="link danger" onClick={() => void change(m, null)} aria-label={`Remove ${m.email}`}>
                  Remove
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
