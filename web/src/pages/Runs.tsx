import { lazy, Suspense, useEffect, useMemo, useState, type FormEvent } from 'react';
import { api, describeError, type Me, type Run } from '../api/client';
import { ErrorText, formatTime, PartBoundary } from '../components';
import { useLoad, type Answer } from '../load';
import { loadPages, type Collected } from '../paging';
import { canWrite, roleIn, WorkspaceHeader } from './workspace';
import { By, useMembers } from '../members';

// The run view (notebook renderer) and the schedules (croner) load on demand.
const RunDetail = lazy(() => import('./RunDetail'));
const Schedules = lazy(() => import('./Schedules'));

const ACTIVE = new Set(['queued', 'running']);
/** Live status: looked at again 250 ms after a change, then 0.5, 1 and every 2 s (a warm run ends in a few hundred ms). */
const POLL_FIRST_MS = 250;
const POLL_MS = 2000;
/**
 * The workspace's notebooks, wherever they are (`kind=notebook`, decision 0203: not the executed
 * copies runs keep in `.runs/` folders), up to LIST_MAX_PAGES pages.
 */
async function listNotebooks(ws: string): Promise<Answer<Collected<string>>> {
  const answer = await loadPages((page) => api.GET('/api/v1/data-resources/{ws}/objects', { params: { path: { ws }, query: { kind: 'notebook', ...page } } }));
  return answer.data ? { data: { ...answer.data, items: answer.data.items.map((o) => o.path) } } : { error: answer.error };
}

const NOT_AN_OBJECT = 'Parameters must be a JSON object, e.g. {"n": 7, "region": "eu"}.';

/**
 * The run form's parameters: empty for none, else a JSON object (papermill's convention: each
 * name becomes a variable set after the notebook's cell tagged `parameters`). A sentence when it
 * is not one; the server checks the names.
 */
export function parseParameters(text: string): Record<string, unknown> | undefined | string {
  if (text.trim() === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return NOT_AN_OBJECT;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return NOT_AN_OBJECT;
  return value as Record<string, unknown>;
}

/** Runs shown at first, and added by each "Show older runs", up to the API's page size. */
const RUNS_STEP = 100;
const RUNS_MAX = 1000;
const STATUSES: Run['status'][] = ['queued', 'running', 'succeeded', 'failed', 'cancelled'];

export function RunsPage({ me, ws }: { me: Me; ws: string }) {
  const writable = canWrite(roleIn(me, ws));
  // The newest runs (more on demand), of one status if the reader picks one: a schedule that
  // fires every minute leaves a thousand runs a day, and the failed ones are what is looked for.
  const [shownLimit, setShownLimit] = useState(RUNS_STEP);
  const [status, setStatus] = useState<Run['status'] | ''>('');
  useEffect(() => {
    setShownLimit(RUNS_STEP);
    setStatus('');
  }, [ws]);
  // Live status: polled while a run is queued or running.
  const list = useLoad(
    () => api.GET('/api/v1/workspaces/{ws}/runs', { params: { path: { ws }, query: { limit: shownLimit, ...(status ? { status } : {}) } } }),
    [ws, shownLimit, status],
    {
      pollWhile: (d) => d.items.some((r) => ACTIVE.has(r.status)),
      pollFirstMs: POLL_FIRST_MS,
      pollMs: POLL_MS,
    },
  );
  const runs = list.data?.items ?? null;
  const members = useMembers(ws);
  const older = list.data?.next_cursor != null;
  const notebookList = useLoad(() => listNotebooks(ws), [ws]);
  const notebooks = useMemo(() => notebookList.data?.items ?? [], [notebookList.data]);
  const [notebook, setNotebook] = useState('');
  const [parameters, setParameters] = useState('');
  const [startError, setStartError] = useState<string | null>(null);
  const [openRun, setOpenRun] = useState<string | null>(null);
  const [rowError, setRowError] = useState<{ id: string; message: string } | null>(null);
  useEffect(() => setNotebook((cur) => cur || notebooks[0] || ''), [notebooks]);
  // An editor on this page is likely to start a run: the workspace's server and a warm kernel
  // start meanwhile (decision 0209). Nothing to show either way.
  useEffect(() => {
    if (writable) void api.POST('/api/v1/workspaces/{ws}/runs/warm-up', { params: { path: { ws } } }).catch(() => undefined);
  }, [ws, writable]);

  const start = async (e: FormEvent) => {
    e.preventDefault();
    setStartError(null);
    const given = parseParameters(parameters);
    if (typeof given === 'string') return setStartError(given);
    const body = given === undefined ? { notebook_path: notebook } : { notebook_path: notebook, parameters: given };
    const { error: err } = await api.POST('/api/v1/workspaces/{ws}/runs', { params: { path: { ws } }, body });
    if (err) setStartError(describeError(err));
    else await list.reload();
  };

  // A queued run is never started; a running one has its kernel stopped by the worker holding it.
  // One that ended meanwhile is the server's 409, said in words on its row.
  const cancel = async (r: Run) => {
    if (!window.confirm(`Cancel the run of ${r.notebook_path}?${r.status === 'running' ? ' Its kernel is stopped; what it wrote so far stays.' : ''}`)) return;
    setRowError(null);
    const { error: err } = await api.POST('/api/v1/workspaces/{ws}/runs/{id}/cancel', { params: { path: { ws, id: r.id } } });
    if (err) setRowError({ id: r.id, message: describeError(err) });
    await list.reload();
  };

  const shown = runs?.find((r) => r.id === openRun) ?? null;

  return (
    <section>
      <WorkspaceHeader me={me} ws={ws} current="runs" />
      <h2>Runs</h2>
      {writable ? (
        notebooks.length > 0 ? (
          <form className="toolbar" onSubmit={(e) => void start(e)}>
            <label>
              Notebook
              <select value={notebook} onChange={(e) => setNotebook(e.target.value)}>
                {notebooks.map((n) => (
                  <option key={n} value={n}>
                    {n}
                  </option>
                ))}
              </select>
            </label>
            <label>
              Parameters
              <input
                value={parameters}
                onChange={(e) => setParameters(e.target.value)}
                placeholder='{"n": 7}'
                spellCheck={false}
                aria-describedby="parameters-help"
              />
            </label>
            <span id="parameters-help" className="visually-hidden">
              Optional: a JSON object; each name becomes a variable set after the notebook’s cell tagged parameters.
            </span>
            <button type="submit">Run now</button>
            {notebookList.data?.complete === false ? (
              <span className="muted">The workspace holds more notebooks: the first {notebooks.length.toLocaleString()} by path are offered here.</span>
            ) : null}
            <ErrorText error={startError} />
          </form>
        ) : notebookList.error ? (
          <ErrorText error={notebookList.error} />
        ) : notebookList.data ? (
          <p className="empty">No notebook in this workspace yet: upload an .ipynb file under Files, then run it here.</p>
        ) : null
      ) : null}
      <ErrorText error={list.error} />
      <div className="toolbar">
        <label>
          Status
          <select value={status} onChange={(e) => setStatus(e.target.value as Run['status'] | '')}>
            <option value="">all</option>
            {STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
      </div>
      {runs?.length === 0 ? <p className="empty">{status ? `No ${status} runs.` : 'No runs yet.'}</p> : null}
      {runs && runs.length > 0 ? (
        <table className="listing">
          <caption className="visually-hidden">Runs, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Notebook</th>
              <th scope="col">Status</th>
              <th scope="col">Started</th>
              <th scope="col">Finished</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {runs.map((r) => (
              <tr key={r.id}>
                <td>
                  {r.notebook_path}
                  <div className="muted">
                    {r.schedule_id === null ? 'run now' : 'on a schedule'}
                    <By id={r.created_by} members={members} />
                  </div>
                </td>
                <td>
                  <span className={`status status-${r.status}`}>{r.status}</span>
                  {r.error && r.error !== r.status ? <div className="error">{r.error}</div> : null}
                </td>
                <td>{formatTime(r.started_at)}</td>
                <td>{formatTime(r.finished_at)}</td>
                <td className="actions">
                  <button
                    type="button"
                    className="link"
                    onClick={() => setOpenRun(r.id)}
                    aria-label={`Log and output of the run of ${r.notebook_path} started ${formatTime(r.started_at) || 'not yet'}`}
                  >
                    Log and output
                  </button>
                  {writable && ACTIVE.has(r.status) ? (
                    <button
                      type="button"
                      className="link danger"
                      onClick={() => void cancel(r)}
                      aria-label={`Cancel the run of ${r.notebook_path} started ${formatTime(r.started_at) || 'not yet'}`}
                    >
                      Cancel
                    </button>
                  ) : null}
                  {rowError?.id === r.id ? <ErrorText error={rowError.message} /> : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      {older ? (
        shownLimit < RUNS_MAX ? (
          <p>
            <button type="button" className="secondary" onClick={() => setShownLimit((n) => Math.min(RUNS_MAX, n + RUNS_STEP))}>
              Show older runs
            </button>{' '}
            <span className="muted">The newest {shownLimit.toLocaleString()} are shown.</span>
          </p>
        ) : (
          <p className="muted">
            The newest {RUNS_MAX.toLocaleString()} {status ? `${status} runs` : 'runs'} are shown; older ones are listed by the API (
            <code>GET /api/v1/workspaces/{'{ws}'}/runs?cursor=…</code>).
          </p>
        )
      ) : null}
      {shown ? (
        <PartBoundary key={shown.id} what="run view">
          <Suspense fallback={<p aria-busy="true">Loading…</p>}>
            <RunDetail key={`${shown.id}:${shown.status}`} ws={ws} run={shown} onClose={() => setOpenRun(null)} />
          </Suspense>
        </PartBoundary>
      ) : null}
      <PartBoundary what="schedules">
        <Suspense fallback={<p aria-busy="true">Loading the schedules…</p>}>
          <Schedules ws={ws} writable={writable} notebooks={notebooks} members={members} />
        </Suspense>
      </PartBoundary>
    </section>
  );
}
