import { useState, type FormEvent } from 'react';
import { api, describeError } from '../api/client';
import { ErrorText } from '../components';
import { safeNext } from '../nav';
import { navigate } from '../router';

/** Logs in with the session cookie (set HttpOnly by the server); the token in the answer is not kept. */
export function LoginPage({ next, onLoggedIn }: { next: string | null; onLoggedIn: () => Promise<void> }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const { error: err } = await api.POST('/api/v1/auth/login', { body: { email, password } });
      if (err) {
        setError(describeError(err));
        return;
      }
      const target = safeNext(next, window.location.origin);
      // JupyterLab is not part of this app: a full page load.
      if (/^\/jupyter(\/|$)/.test(target)) {
        window.location.assign(target);
        return;
      }
      await onLoggedIn();
      navigate(target, true);
    } catch (err) {
      setError(describeError(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <main className="centered login">
      <h1>Log in to codeagent</h1>
      <form onSubmit={(e) => void submit(e)} aria-describedby={error ? 'login-error' : undefined}>
        <label>
          Email
          <input type="email" name="email" autoComplete="username" required value={email} onChange={(e) => setEmail(e.target.value)} />
        </label>
        <label>
          Password
          <input type="password" name="password" autoComplete="current-password" required value={password} onChange={(e) => setPassword(e.target.value)} />
        </label>
        <ErrorText error={error} id="login-error" />
        <button type="submit" disabled={busy}>
          {busy ? 'Logging in…' : 'Log in'}
        </button>
      </form>
      <p className="hint">
        No account? A system administrator creates it (the first one is printed by <code>codeagent start</code>).
      </p>
    </main>
  );
}
