import { useMemo, useState } from 'react';
import { api, describeError, markedFolder, type Me, type TrashItem } from '../api/client';
import { ErrorText, formatBytes, formatTime } from '../components';
import { useLoad } from '../load';
import { loadPages } from '../paging';
import { canWrite, roleIn, WorkspaceHeader } from './workspace';
import { By, useMembers } from '../members';
import { eachInTurn, type BulkProgress } from '../bulk';

type Action = 'restore' | 'purge';

/** Restores or purges one trash item; a sentence when the server refuses. */
async function apply(ws: string, item: TrashItem, action: Action): Promise<string | null> {
  const { error: err } =
    action === 'restore'
      ? await api.POST('/api/v1/data-resources/{ws}/trash/{id}/restore', { params: { path: { ws, id: item.id } } })
      : await api.DELETE('/api/v1/data-resources/{ws}/trash/{id}', { params: { path: { ws, id: item.id } } });
  if (!err) return null;
  return (err as { error?: string }).error === 'conflict' ? 'A file already exists at this path: rename or delete it first, then restore.' : describeError(err);
}

export function TrashPage({ me, ws }: { me: Me; ws: string }) {
  const writable = canWrite(roleIn(me, ws));
  // The whole trash, newest first (up to LIST_MAX_PAGES pages: a deleted folder can fill many).
  const trash = useLoad(() => loadPages((page) => api.GET('/api/v1/data-resources/{ws}/trash', { params: { path: { ws }, query: page } })), [ws]);
  const items = trash.data?.items ?? null;
  const members = useMembers(ws);
  /** The server's refusal of each item it refused, by id. */
  const [rowErrors, setRowErrors] = useState<ReadonlyMap<string, string>>(new Map());
  const [filter, setFilter] = useState('');
  const [selected, setSelected] = useState<ReadonlySet<string>>(new Set());
  /** A bulk action under way: what it does, and how far it is. */
  const [progress, setProgress] = useState<BulkProgress<Action> | null>(null);

  const shown = useMemo(() => {
    const q = filter.trim().toLowerCase();
    return items === null ? null : q === '' ? items : items.filter((t) => shownPath(t).toLowerCase().includes(q));
  }, [items, filter]);
  // Only what is listed and shown is acted on: a selected item the filter hides, or one gone since, is left alone.
  const chosen = useMemo(() => (shown ?? []).filter((t) => selected.has(t.id)), [shown, selected]);
  const allChosen = shown !== null && shown.length > 0 && chosen.length === shown.length;

  const toggle = (id: string) =>
    setSelected((s) => {
      const next = new Set(s);
      if (!next.delete(id)) next.add(id);
      return next;
    });

  const act = async (item: TrashItem, action: Action) => {
    setRowErrors(new Map());
    if (action === 'purge' && !window.confirm(`Delete ${shownPath(item)} for good? This cannot be undone.`)) return;
    const problem = await apply(ws, item, action);
    if (problem) setRowErrors(new Map([[item.id, problem]]));
    else await trash.reload();
  };

  /**
   * The chosen items one after the other (a folder deleted with its files is as many items): the
   * page says how far it is, each refusal stays on its row, the others are done.
   */
  const actOnChosen = async (action: Action) => {
    const list = chosen;
    if (list.length === 0 || progress !== null) return;
    if (action === 'purge' && !window.confirm(`Delete ${list.length.toLocaleString()} files for good? This cannot be undone.`)) return;
    setRowErrors(new Map());
    setProgress({ action, done: 0, total: list.length });
    const refused = await eachInTurn(
      list,
      (item) => item.id,
      (item) => apply(ws, item, action),
      (done) => setProgress({ action, done, total: list.length }),
    );
    setProgress(null);
    setSelected(new Set(refused.keys()));
    setRowErrors(refused);
    await trash.reload();
  };

  return (
    <section>
      <WorkspaceHeader me={me} ws={ws} current="trash" />
      <h2>Trash</h2>
      <ErrorText error={trash.error} />
      {items === null && !trash.error ? <p aria-busy="true">Loading…</p> : null}
      {items?.length === 0 ? <p className="empty">The trash is empty. Deleted files land here and can be restored.</p> : null}
      {trash.data?.complete === false ? (
        <p className="muted" role="note">
          The trash holds more than {trash.data.items.length.toLocaleString()} files: the newest {trash.data.items.length.toLocaleString()} are listed here.
          Restore or delete some of them for good to see the older ones.
        </p>
      ) : null}
      {items && items.length > 0 ? (
        <div className="toolbar">
          <label>
            Filter
            <input type="search" value={filter} onChange={(e) => setFilter(e.target.value)} placeholder="Part of a path" />
          </label>
          {writable ? (
            <>
              <button type="button" disabled={chosen.length === 0 || progress !== null} onClick={() => void actOnChosen('restore')}>
                Restore selected ({chosen.length.toLocaleString()})
              </button>
              <button type="button" className="secondary danger" disabled={chosen.length === 0 || progress !== null} onClick={() => void actOnChosen('purge')}>
                Delete selected for good
              </button>
            </>
          ) : null}
          {progress ? (
            <span role="status" aria-busy="true">
              {progress.action === 'restore' ? 'Restoring' : 'Deleting'} {progress.done.toLocaleString()} of {progress.total.toLocaleString()}…
            </span>
          ) : null}
        </div>
      ) : null}
      {shown?.length === 0 && items !== null && items.length > 0 ? <p className="empty">Nothing in the trash matches this filter.</p> : null}
      {shown && shown.length > 0 ? (
        <table className="listing">
          <caption className="visually-hidden">Deleted files</caption>
          <thead>
            <tr>
              {writable ? (
                <th scope="col">
                  <input
                    type="checkbox"
                    checked={allChosen}
                    onChange={() => setSelected(allChosen ? new Set() : new Set(shown.map((t) => t.id)))}
                    aria-label={filter.trim() === '' ? 'Select all' : 'Select all that match the filter'}
                  />
                </th>
              ) : null}
              <th scope="col">Path</th>
              <th scope="col">Size</th>
              <th scope="col">Deleted</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {shown.map((t) => (
              <tr key={t.id}>
                {writable ? (
                  <td>
                    <input type="checkbox" checked={selected.has(t.id)} onChange={() => toggle(t.id)} aria-label={`Select ${shownPath(t)}`} />
                  </td>
                ) : null}
                <td>
                  {shownPath(t)}
                  {markedFolder(t.path) !== undefined ? <span className="muted"> (the folder itself)</span> : null}
                  <ErrorText error={rowErrors.get(t.id) ?? null} />
                </td>
                <td>{formatBytes(t.size)}</td>
                <td>
                  {formatTime(t.deleted_at)}
                  <By id={t.deleted_by} members={members} />
                </td>
                <td className="actions">
                  {writable ? (
                    <>
                      <button type="button" className="link" onClick={() => void act(t, 'restore')} aria-label={`Restore ${shownPath(t)}`}>
                        Restore
                      </button>
                      <button type="button" className="link danger" onClick={() => void act(t, 'purge')} aria-label={`Delete for good: ${shownPath(t)}`}>
                        Delete for good
                      </button>
                    </>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </section>
  );
}

/** A trash item's path as the file browser shows it: an empty folder's marker as that folder (`a/b/`). */
function shownPath(item: TrashItem): string {
  const folder = markedFolder(item.path);
  return folder === undefined ? item.path : `${folder}/`;
}
