import { useState } from 'react';
import { api, describeError, markedFolder, type Me, type TrashItem } from '../api/client';
import { ErrorText, formatBytes, formatTime } from '../components';
import { useLoad } from '../load';
import { loadPages } from '../paging';
import { canWrite, roleIn, WorkspaceHeader } from './workspace';
import { By, useMembers } from '../members';

export function TrashPage({ me, ws }: { me: Me; ws: string }) {
  const writable = canWrite(roleIn(me, ws));
  // The whole trash, newest first (up to LIST_MAX_PAGES pages: a deleted folder can fill many).
  const trash = useLoad(() => loadPages((page) => api.GET('/api/v1/data-resources/{ws}/trash', { params: { path: { ws }, query: page } })), [ws]);
  const items = trash.data?.items ?? null;
  const members = useMembers(ws);
  const [rowError, setRowError] = useState<{ id: string; message: string } | null>(null);

  const act = async (item: TrashItem, action: 'restore' | 'purge') => {
    setRowError(null);
    if (action === 'purge' && !window.confirm(`Delete ${shownPath(item)} for good? This cannot be undone.`)) return;
    const { error: err } =
      action === 'restore'
        ? await api.POST('/api/v1/data-resources/{ws}/trash/{id}/restore', { params: { path: { ws, id: item.id } } })
        : await api.DELETE('/api/v1/data-resources/{ws}/trash/{id}', { params: { path: { ws, id: item.id } } });
    if (err) {
      const e = err as { error?: string };
      setRowError({
        id: item.id,
        message: e.error === 'conflict' ? 'A file already exists at this path: rename or delete it first, then restore.' : describeError(err),
      });
    } else await trash.reload();
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
        <table className="listing">
          <caption className="visually-hidden">Deleted files</caption>
          <thead>
            <tr>
              <th scope="col">Path</th>
              <th scope="col">Size</th>
              <th scope="col">Deleted</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {items.map((t) => (
              <tr key={t.id}>
                <td>
                  {shownPath(t)}
                  {markedFolder(t.path) !== undefined ? <span className="muted"> (the folder itself)</span> : null}
                  {rowError?.id === t.id ? <ErrorText error={rowError.message} /> : null}
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
