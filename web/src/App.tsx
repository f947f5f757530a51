import { useCallback, useEffect, useState } from 'react';
import { api, describeError, type Me } from './api/client';
import { Link } from './components';
import { loginPath } from './nav';
import { navigate, parseRoute, useLocation } from './router';
import { LoginPage } from './pages/Login';
import { HomePage } from './pages/Home';
import { FilesPage, prefetchListing } from './pages/Files';
import { TrashPage } from './pages/Trash';
import { MembersPage } from './pages/Members';
import { RunsPage } from './pages/Runs';
import { ManagePage } from './pages/Manage';
import { AccountPage } from './pages/Account';

type Session = { state: 'loading' } | { state: 'anonymous' } | { state: 'error'; message: string } | { state: 'in'; me: Me };

export function App() {
  const location = useLocation();
  const route = parseRoute(location);
  const [session, setSession] = useState<Session>({ state: 'loading' });

  const refresh = useCallback(async () => {
    const { data, error, response } = await api.GET('/api/v1/auth/me');
    if (data) setSession({ state: 'in', me: data });
    else if (response.status === 401) setSession({ state: 'anonymous' });
    else setSession({ state: 'error', message: describeError(error) });
  }, []);

  useEffect(() => {
    // The file browser's listing goes out beside the session check (first load, bench/web-files).
    const first = parseRoute(window.location);
    if (first.name === 'files') prefetchListing(first.ws, first.prefix);
    void refresh().catch((err: unknown) => setSession({ state: 'error', message: describeError(err) }));
  }, [refresh]);

  // A page that needs a session sends a visitor without one to the login page, and back afterwards.
  useEffect(() => {
    if (session.state === 'anonymous' && route.name !== 'login') navigate(loginPath(location.pathname + location.search), true);
  }, [session.state, route.name, location.pathname, location.search]);

  useEffect(() => {
    const titles: Record<string, string> = {
      home: 'Workspaces',
      login: 'Log in',
      files: 'Files',
      trash: 'Trash',
      runs: 'Runs',
      members: 'Members',
      manage: 'Administration',
      account: 'Your account',
      notFound: 'Not found',
    };
    document.title = `${titles[route.name] ?? ''} · codeagent platform`;
  }, [route.name]);

  if (route.name === 'login') return <LoginPage next={route.next} onLoggedIn={refresh} />;
  if (session.state === 'loading' || session.state === 'anonymous') {
    return (
      <main className="centered" aria-busy="true">
        <p>Loading…</p>
      </main>
    );
  }
  if (session.state === 'error') {
    return (
      <main className="centered">
        <h1>The platform is not reachable</h1>
        <p className="error" role="alert">
          {session.message}
        </p>
        <button type="button" onClick={() => void refresh()}>
          Try again
        </button>
      </main>
    );
  }
  const me = session.me;
  const logout = async () => {
    await api.POST('/api/v1/auth/logout');
    setSession({ state: 'anonymous' });
    navigate('/login', true);
  };
  return (
    <>
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header className="topbar">
        <Link to="/" className="brand">
          codeagent
        </Link>
        <nav aria-label="Main">
          <Link to="/">Workspaces</Link>
          {me.is_system_admin ? <Link to="/manage">Administration</Link> : null}
        </nav>
        <Link to="/account" className="who" title="Your account">
          {me.email}
        </Link>
        <button type="button" className="secondary" onClick={() => void logout()}>
          Log out
        </button>
      </header>
      <main id="main" tabIndex={-1}>
        {route.name === 'home' ? <HomePage me={me} /> : null}
        {route.name === 'files' ? <FilesPage me={me} ws={route.ws} prefix={route.prefix} /> : null}
        {route.name === 'trash' ? <TrashPage me={me} ws={route.ws} /> : null}
        {route.name === 'runs' ? <RunsPage me={me} ws={route.ws} /> : null}
        {route.name === 'members' ? <MembersPage me={me} ws={route.ws} /> : null}
        {route.name === 'manage' ? me.is_system_admin ? <ManagePage me={me} /> : <NotFound /> : null}
        {route.name === 'account' ? <AccountPage me={me} /> : null}
        {route.name === 'notFound' ? <NotFound /> : null}
      </main>
    </>
  );
}

function NotFound() {
  return (
    <section>
      <h1>Page not found</h1>
      <p>
        Nothing lives at this address. Go back to <Link to="/">your workspaces</Link>.
      </p>
    </section>
  );
}
