import { useState, type FormEvent } from 'react';
import { api, describeError, type Me } from '../api/client';
import { ErrorText, formatTime } from '../components';
import { checkNewPassword, MIN_PASSWORD } from '../password';

/**
 * The logged-in user's account: who they are, and their own password (`POST /auth/password`,
 * docs/contract/spec.md §4.5): changing it ends every other session of theirs, this one stays.
 */
export function AccountPage({ me }: { me: Me }) {
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  const [repeat, setRepeat] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setNotice(null);
    const wrong = checkNewPassword(current, next, repeat);
    setError(wrong);
    if (wrong) return;
    setBusy(true);
    try {
      const { error: err } = await api.POST('/api/v1/auth/password', { body: { current_password: current, new_password: next } });
      if (err) {
        // 401 here is the current password (the session itself is fine, or the page would not be shown).
        setError(err.error === 'invalid_credentials' ? 'The current password is wrong.' : describeError(err));
        return;
      }
      setCurrent('');
      setNext('');
      setRepeat('');
      setNotice('Password changed. Your other sessions (other browsers and devices, API tokens) were logged out; this one stays.');
    } catch (err) {
      setError(describeError(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <section>
      <h1>Your account</h1>
      <dl className="facts">
        <dt>Email</dt>
        <dd>{me.email}</dd>
        <dt>Name</dt>
        <dd>{me.name}</dd>
        <dt>Role</dt>
        <dd>{me.is_system_admin ? 'System administrator' : 'User'}</dd>
        <dt>Since</dt>
        <dd>{formatTime(me.created_at)}</dd>
      </dl>
      <h2 id="password-heading">Change your password</h2>
      <form className="stack" aria-labelledby="password-heading" onSubmit={(e) => void submit(e)}>
        {/* For password managers: the account the new password belongs to. */}
        <input type="text" name="username" autoComplete="username" value={me.email} readOnly hidden />
        <label>
          Current password
          <input type="password" name="current-password" autoComplete="current-password" value={current} onChange={(e) => setCurrent(e.target.value)} />
        </label>
        <label>
          New password
          <input
            type="password"
            name="new-password"
            autoComplete="new-password"
            value={next}
            onChange={(e) => setNext(e.target.value)}
            aria-describedby="new-password-help"
          />
        </label>
        <span id="new-password-help" className="hint">
          At least {MIN_PASSWORD} characters.
        </span>
        <label>
          Repeat the new password
          <input type="password" name="repeat-password" autoComplete="new-password" value={repeat} onChange={(e) => setRepeat(e.target.value)} />
        </label>
        <ErrorText error={error} />
        {notice ? <p role="status">{notice}</p> : null}
        <button type="submit" disabled={busy}>
          {busy ? 'Changing…' : 'Change password'}
        </button>
      </form>
    </section>
  );
}
