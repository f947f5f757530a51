import { useCallback, useEffect, useState, type FormEvent } from 'react';
import { api, describeError, type Me, type Member, type User, type Workspace } from '../api/client';
import { ErrorText, formatTime } from '../components';

type Role = Member['role'];
const ROLES: Role[] = ['admin', 'editor', 'viewer'];

/** Platform administration: shown to system administrators only (the API refuses others with 403 anyway). */
export function ManagePage({ me }: { me: Me }) {
  const [users, setUsers] = useState<User[]>([]);
  const [workspaces, setWorkspaces] = useState<Workspace[]>([]);
  const [selected, setSelected] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);

  const load = useCallback(async () => {
    const [u, w] = await Promise.all([
      api.GET('/api/v1/platform/users', { params: { query: { limit: 1000 } } }),
      api.GET('/api/v1/platform/workspaces', { params: { query: { limit: 1000 } } }),
    ]);
    if (u.error || w.error) setError(describeError(u.error ?? w.error));
    setUsers(u.data?.items ?? []);
    setWorkspaces(w.data?.items ?? []);
  }, []);

  useEffect(() => void load(), [load]);

  return (
    <section>
      <h1>Administration</h1>
      <ErrorText error={error} />
      <div className="grid2">
        <Users users={users} me={me} onChange={load} />
        <Workspaces workspaces={workspaces} selected={selected} onSelect={setSelected} onChange={load} />
      </div>
      {selected ? <Members ws={workspaces.find((w) => w.id === selected)} users={users} onChange={load} /> : null}
    </section>
  );
}

function Users({ users, me, onChange }: { users: User[]; me: Me; onChange: () => Promise<void> }) {
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

  const setDisabled = async (u: User, disabled: boolean) => {
    const { error: err } = await api.PATCH('/api/v1/platform/users/{id}', { params: { path: { id: u.id } }, body: { disabled } });
    if (err) setError(describeError(err));
    await onChange();
  };

  return (
    <div>
      <h2>Users</h2>
      <form className="stack" onSubmit={(e) => void create(e)} aria-label="Create user">
        <label>Email<input type="email" required value={form.email} onChange={(e) => setForm({ ...form, email: e.target.value })} /></label>
        <label>Name<input required value={form.name} onChange={(e) => setForm({ ...form, name: e.target.value })} /></label>
        <label>Password<input type="password" required minLength={8} autoComplete="new-password" value={form.password} onChange={(e) => setForm({ ...form, password: e.target.value })} /></label>
        <label className="inline"><input type="checkbox" checked={form.admin} onChange={(e) => setForm({ ...form, admin: e.target.checked })} /> System administrator</label>
        <ErrorText error={error} />
        {notice ? <p role="status">{notice}</p> : null}
        <button type="submit">Create user</button>
      </form>
      <table className="listing">
        <caption className="visually-hidden">Users</caption>
        <thead>
          <tr><th scope="col">Email</th><th scope="col">Role</th><th scope="col">State</th><th scope="col">Actions</th></tr>
        </thead>
        <tbody>
          {users.map((u) => (
            <tr key={u.id}>
              <td>{u.email}<div className="muted">{u.name}</div></td>
              <td>{u.is_system_admin ? 'system admin' : u.platform_role_id}</td>
              <td>{u.disabled_at ? `disabled ${formatTime(u.disabled_at)}` : 'active'}</td>
              <td className="actions">
                {u.id === me.id ? null : (
                  <button type="button" className="link" onClick={() => void setDisabled(u, !u.disabled_at)}>{u.disabled_at ? 'Enable' : 'Disable'}</button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function Workspaces({ workspaces, selected, onSelect, onChange }: { workspaces: Workspace[]; selected: string | null; onSelect: (id: string) => void; onChange: () => Promise<void> }) {
  const [name, setName] = useState('');
  const [error, setError] = useState<string | null>(null);

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

  return (
    <div>
      <h2>Workspaces</h2>
      <form className="stack" onSubmit={(e) => void create(e)} aria-label="Create workspace">
        <label>Name<input required value={name} onChange={(e) => setName(e.target.value)} /></label>
        <ErrorText error={error} />
        <button type="submit">Create workspace</button>
      </form>
      {workspaces.length === 0 ? <p className="empty">No workspaces yet: create the first one above.</p> : null}
      <ul className="plain">
        {workspaces.map((w) => (
          <li key={w.id}>
            <button type="button" className="link" aria-pressed={selected === w.id} onClick={() => onSelect(w.id)}>
              {w.name}
            </button>{' '}
            <span className="muted">{w.member_count} {w.member_count === 1 ? 'member' : 'members'}</span>
          </li>
        ))}
      </ul>
    </div>
  );
}

function Members({ ws, users, onChange }: { ws: Workspace | undefined; users: User[]; onChange: () => Promise<void> }) {
  const [members, setMembers] = useState<Member[]>([]);
  const [userId, setUserId] = useState('');
  const [role, setRole] = useState<Role>('editor');
  const [error, setError] = useState<string | null>(null);
  const [rowError, setRowError] = useState<{ id: string; message: string } | null>(null);

  const load = useCallback(async () => {
    if (!ws) return;
    const { data, error: err } = await api.GET('/api/v1/platform/workspaces/{id}/members', { params: { path: { id: ws.id }, query: { limit: 1000 } } });
    if (err) setError(describeError(err));
    else setMembers(data.items);
  }, [ws]);

  useEffect(() => void load(), [load]);
  if (!ws) return null;
  const candidates = users.filter((u) => !members.some((m) => m.user_id === u.id));

  const add = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    const { error: err } = await api.POST('/api/v1/platform/workspaces/{id}/members', { params: { path: { id: ws.id } }, body: { user_id: userId || candidates[0]?.id || '', role } });
    if (err) setError((err as { error?: string }).error === 'conflict' ? 'This user is a member already.' : describeError(err));
    else {
      setUserId('');
      await load();
      await onChange();
    }
  };

  const change = async (m: Member, newRole: Role | null) => {
    setRowError(null);
    const { error: err } =
      newRole === null
        ? await api.DELETE('/api/v1/platform/workspaces/{id}/members/{user_id}', { params: { path: { id: ws.id, user_id: m.user_id } } })
        : await api.PATCH('/api/v1/platform/workspaces/{id}/members/{user_id}', { params: { path: { id: ws.id, user_id: m.user_id } }, body: { role: newRole } });
    if (err) setRowError({ id: m.user_id, message: describeError(err) });
    await load();
    await onChange();
  };

  return (
    <div>
      <h2>Members of {ws.name}</h2>
      {candidates.length > 0 ? (
        <form className="toolbar" onSubmit={(e) => void add(e)} aria-label="Add member">
          <label>User
            <select value={userId || candidates[0]?.id} onChange={(e) => setUserId(e.target.value)}>
              {candidates.map((u) => <option key={u.id} value={u.id}>{u.email}</option>)}
            </select>
          </label>
          <label>Role
            <select value={role} onChange={(e) => setRole(e.target.value as Role)}>
              {ROLES.map((r) => <option key={r} value={r}>{r}</option>)}
            </select>
          </label>
          <button type="submit">Add member</button>
        </form>
      ) : <p className="muted">Every user is a member already.</p>}
      <ErrorText error={error} />
      <table className="listing">
        <caption className="visually-hidden">Members of {ws.name}</caption>
        <thead><tr><th scope="col">Member</th><th scope="col">Role</th><th scope="col">Actions</th></tr></thead>
        <tbody>
          {members.map((m) => (
            <tr key={m.user_id}>
              <td>{m.email}{rowError?.id === m.user_id ? <ErrorText error={rowError.message} /> : null}</td>
              <td>
                <select aria-label={`Role of ${m.email}`} value={m.role} onChange={(e) => void change(m, e.target.value as Role)}>
                  {ROLES.map((r) => <option key={r} value={r}>{r}</option>)}
                </select>
              </td>
              <td className="actions"><button type="button" className="link danger" onClick={() => void change(m, null)} aria-label={`Remove ${m.email}`}>Remove</button></td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
