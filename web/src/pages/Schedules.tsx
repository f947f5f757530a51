import { Cron } from 'croner';
import { useEffect, useMemo, useState, type FormEvent } from 'react';
import { api, describeError, type Schedule } from '../api/client';
import { ErrorText, formatTime, MoreThan } from '../components';
import { useLoad } from '../load';
import { loadPages } from '../paging';
import { By, type Members } from '../members';

/** The browser's IANA zone: the default for new schedules and the zone fire times are shown in. */
export const userZone = (): string => Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';

/**
 * The next `count` fire times of a cron in `timezone`, with croner, the library the backend checks
 * and schedules with (packages/runs/src/cron.ts), so that both read an expression the same way:
 * 5 fields, or 6 with leading seconds. An error sentence instead when it is not valid.
 */
export function nextFires(cron: string, timezone: string, count = 5, from = new Date()): { fires: Date[] } | { error: string } {
  const fields = cron.trim().split(/\s+/).filter(Boolean);
  if (fields.length !== 5 && fields.length !== 6)
    return { error: `It has ${fields.length} fields; use 5 (minute hour day month weekday) or 6 with leading seconds.` };
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone });
  } catch {
    return { error: `${timezone} is not an IANA time zone (e.g. UTC, Europe/Berlin).` };
  }
  let fires: Date[];
  try {
    fires = new Cron(cron, { paused: true, timezone }).nextRuns(count, from);
  } catch (err) {
    // Croner's search for a date that never comes can outgrow the stack (several months, none with
    // the day): that cron never fires, as when the search ends with nothing.
    if (!(err instanceof RangeError && /call stack/i.test(err.message))) return { error: (err as Error).message.replace(/^CronPattern: /, '') };
    fires = [];
  }
  return fires.length > 0 ? { fires } : { error: 'No date matches it (a day its months do not have, e.g. 31 in February or April): it would never run.' };
}

/** A fire time in the user's own zone (and the zone's name, so nobody guesses). */
export const FIRE_FORMAT: Intl.DateTimeFormatOptions = {
  weekday: 'short',
  year: 'numeric',
  month: 'short',
  day: 'numeric',
  hour: '2-digit',
  minute: '2-digit',
  timeZoneName: 'short',
};
const inUserZone = (d: Date) => d.toLocaleString(undefined, FIRE_FORMAT);

export function CronHelper({ cron, timezone, id = 'cron-help' }: { cron: string; timezone: string; id?: string }) {
  const result = useMemo(() => nextFires(cron, timezone), [cron, timezone]);
  if ('error' in result)
    return (
      <p className="error" id={id}>
        {result.error}
      </p>
    );
  return (
    <div id={id} aria-live="polite">
      <p className="hint">Next five runs, in your time zone ({userZone()}):</p>
      <ol className="fires" aria-label="Next five runs">
        {result.fires.map((d) => (
          <li key={d.getTime()}>{inUserZone(d)}</li>
        ))}
      </ol>
    </div>
  );
}

export default function Schedules({ ws, writable, notebooks, members }: { ws: string; writable: boolean; notebooks: string[]; members: Members }) {
  // (At most MAX_SCHEDULES_PER_WORKSPACE, 50 by default: one page, unless an operator raised it.)
  const schedules = useLoad(() => loadPages((page) => api.GET('/api/v1/workspaces/{ws}/schedules', { params: { path: { ws }, query: page } })), [ws]);
  const items = schedules.data?.items ?? null;
  const [rowError, setRowError] = useState<{ id: string; message: string } | null>(null);
  const [notebook, setNotebook] = useState('');
  const [cron, setCron] = useState('0 6 * * 1-5');
  const [timezone, setTimezone] = useState(userZone);
  const [formError, setFormError] = useState<string | null>(null);

  useEffect(() => setNotebook((cur) => cur || notebooks[0] || ''), [notebooks]);

  const create = async (e: FormEvent) => {
    e.preventDefault();
    setFormError(null);
    const { error: err } = await api.POST('/api/v1/workspaces/{ws}/schedules', {
      params: { path: { ws } },
      body: { notebook_path: notebook, cron: cron.trim(), timezone: timezone.trim(), enabled: true },
    });
    if (err) setFormError(describeError(err));
    else await schedules.reload();
  };
  const setEnabled = async (s: Schedule, enabled: boolean) => {
    setRowError(null);
    const { error: err } = await api.PATCH('/api/v1/workspaces/{ws}/schedules/{id}', { params: { path: { ws, id: s.id } }, body: { enabled } });
    if (err) setRowError({ id: s.id, message: describeError(err) });
    await schedules.reload();
  };
  // One schedule changed at a time: its cron and zone, with the same helper as a new one.
  const [editing, setEditing] = useState<{ id: string; cron: string; timezone: string } | null>(null);
  const save = async (e: FormEvent, s: Schedule) => {
    e.preventDefault();
    if (!editing) return;
    setRowError(null);
    const { error: err } = await api.PATCH('/api/v1/workspaces/{ws}/schedules/{id}', {
      params: { path: { ws, id: s.id } },
      body: { cron: editing.cron.trim(), timezone: editing.timezone.trim() },
    });
    if (err) setRowError({ id: s.id, message: describeError(err) });
    else setEditing(null);
    await schedules.reload();
  };
  const remove = async (s: Schedule) => {
    if (!window.confirm(`Delete the schedule of ${s.notebook_path} (${s.cron})? Its queued runs are cancelled.`)) return;
    setRowError(null);
    const { error: err } = await api.DELETE('/api/v1/workspaces/{ws}/schedules/{id}', { params: { path: { ws, id: s.id } } });
    if (err) setRowError({ id: s.id, message: describeError(err) });
    await schedules.reload();
  };

  return (
    <section aria-labelledby="schedules-heading">
      <h2 id="schedules-heading">Schedules</h2>
      {writable && notebooks.length > 0 ? (
        <form className="schedule-form" aria-label="New schedule" onSubmit={(e) => void create(e)}>
          <div className="toolbar">
            <label>
              What to run
              <select value={notebook} onChange={(e) => setNotebook(e.target.value)}>
                {notebooks.map((n) => (
                  <option key={n} value={n}>
                    {n}
                  </option>
                ))}
              </select>
            </label>
            <label>
              Cron
              <input value={cron} onChange={(e) => setCron(e.target.value)} aria-describedby="cron-help" spellCheck={false} />
            </label>
            <label>
              Time zone
              <input value={timezone} onChange={(e) => setTimezone(e.target.value)} spellCheck={false} />
            </label>
            <button type="submit">Add schedule</button>
          </div>
          <CronHelper cron={cron} timezone={timezone.trim()} />
          <ErrorText error={formError} />
        </form>
      ) : null}
      <ErrorText error={schedules.error} />
      {items?.length === 0 ? <p className="empty">No schedules yet.</p> : null}
      {schedules.data?.complete === false ? <MoreThan count={schedules.data.items.length} what="schedules" order="by creation" /> : null}
      {items && items.length > 0 ? (
        <table className="listing">
          <caption className="visually-hidden">Schedules</caption>
          <thead>
            <tr>
              <th scope="col">Notebook</th>
              <th scope="col">Cron</th>
              <th scope="col">State</th>
              <th scope="col">Next run</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {items.map((s) => (
              <tr key={s.id}>
                <td>
                  {s.notebook_path}
                  <div>
                    <By id={s.created_by} members={members} lead="made" />
                  </div>
                </td>
                <td>
                  <code>{s.cron}</code> <span className="muted">({s.timezone})</span>
                </td>
                <td>{s.enabled ? 'enabled' : 'disabled'}</td>
                <td>{s.enabled ? formatTime(s.next_run_at) : ''}</td>
                <td className="actions">
                  {writable ? (
                    <>
                      <button
                        type="button"
                        className="link"
                        onClick={() => void setEnabled(s, !s.enabled)}
                        aria-label={`${s.enabled ? 'Disable' : 'Enable'} schedule ${s.cron}`}
                      >
                        {s.enabled ? 'Disable' : 'Enable'}
                      </button>
                      <button
                        type="button"
                        className="link"
                        onClick={() => setEditing(editing?.id === s.id ? null : { id: s.id, cron: s.cron, timezone: s.timezone })}
                        aria-expanded={editing?.id === s.id}
                        aria-label={`Edit schedule ${s.cron}`}
                      >
                        Edit
                      </button>
                      <button type="button" className="link danger" onClick={() => void remove(s)} aria-label={`Delete schedule ${s.cron}`}>
                        Delete
                      </button>
                    </>
                  ) : null}
                  {writable && editing?.id === s.id ? (
                    <form onSubmit={(e) => void save(e, s)} aria-label={`Change schedule ${s.cron}`}>
                      <div className="toolbar">
                        <label>
                          Cron
                          <input
                            value={editing.cron}
                            onChange={(e) => setEditing({ ...editing, cron: e.target.value })}
                            aria-describedby={`cron-help-${s.id}`}
                            spellCheck={false}
                          />
                        </label>
                        <label>
                          Time zone
                          <input value={editing.timezone} onChange={(e) => setEditing({ ...editing, timezone: e.target.value })} spellCheck={false} />
                        </label>
                        <button type="submit">Save</button>
                        <button type="button" className="secondary" onClick={() => setEditing(null)}>
                          Cancel
                        </button>
                      </div>
                      <CronHelper cron={editing.cron} timezone={editing.timezone.trim()} id={`cron-help-${s.id}`} />
                    </form>
                  ) : null}
                  {rowError?.id === s.id ? <ErrorText error={rowError.message} /> : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </section>
  );
}
