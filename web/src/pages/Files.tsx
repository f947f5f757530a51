import { useWindowVirtualizer } from '@tanstack/react-virtual';
import {
  lazy,
  Suspense,
  useCallback,
  useEffect,
  useLayoutEffect,
  useMemo,
  useRef,
  useState,
  type DragEvent,
  type FormEvent,
  type MouseEvent,
  type ReactNode,
  type ReactElement,
  type Ref,
} from 'react';
import { api, archiveUrl, describeError, FOLDER_MARKER, objectUrl, type ListedFolder, type Me, type StoredObject, type VersionItem } from '../api/client';
import { ErrorText, formatBytes, formatTime, Link, MoreThan, PartBoundary } from '../components';
import { filesPath, navigate } from '../router';
import { uploadFile, type UploadHandle } from '../upload';
import { canWrite, roleIn, WorkspaceHeader } from './workspace';
import { encodePath, jupyterPath } from '../nav';
import { collectPages, loadPages, type Collected, type Page } from '../paging';
import { useOnReturn, type Answer } from '../load';
import { By, useMembers, type Members } from '../members';
import { eachInTurn, type BulkProgress } from '../bulk';

// Previews (CSV, notebooks, …) load on demand: their code is not part of the first page load.
const Preview = lazy(() => import('../preview/Preview'));

interface Upload {
  id: number;
  name: string;
  path: string;
  loaded: number;
  total: number;
  state: 'uploading' | 'done' | 'failed' | 'cancelled';
  error?: string;
  handle?: UploadHandle;
}

type SortKey = 'name' | 'size' | 'updated';

/** Pages of 1 000 entries the file browser reads at most in one folder (100 000 files and folders). */
const LIST_PAGES = 100;

/** What lies directly in a folder: a file, or a sub-folder with the number of files under it. */
type Entry = { kind: 'file'; object: StoredObject } | { kind: 'folder'; folder: ListedFolder };

/** One page of what lies directly in `prefix` (the listing by `delimiter=/`, decision 0199). */
async function listPage(ws: string, prefix: string, cursor: string | undefined): Promise<Page<Entry>> {
  const { data, error } = await api.GET('/api/v1/data-resources/{ws}/objects', {
    params: { path: { ws }, query: { prefix, delimiter: '/', limit: 1000, ...(cursor ? { cursor } : {}) } },
  });
  // eslint-disable-next-line @typescript-eslint/only-throw-error -- the API's error body ({ error, message }); describeError reads it
  if (error) throw error;
  const entries: Entry[] = [
    ...(data.folders ?? []).map((folder) => ({ kind: 'folder' as const, folder })),
    // The marker that keeps an empty folder (decision 0070) is not a file of the user's.
    ...data.items.filter((object) => object.path.slice(prefix.length) !== FOLDER_MARKER).map((object) => ({ kind: 'file' as const, object })),
  ];
  return { items: entries, next_cursor: data.next_cursor };
}

/**
 * The first page of a folder asked for at start-up, while the session check (`/auth/me`) is
 * under way, so that the file browser's first load does not wait for two round trips in a row.
 * Used once, by the page for the same folder.
 */
let early: { key: string; first: Promise<Page<Entry>> } | null = null;
export function prefetchListing(ws: string, prefix: string): void {
  const first = listPage(ws, prefix, undefined);
  first.catch(() => undefined);
  early = { key: `${ws}\0${prefix}`, first };
}

/**
 * What lies directly in `prefix` (the server walks past each sub-folder, so a page never costs
 * the files deep below it), following the list's cursor up to LIST_PAGES pages (then `complete`
 * is false); `onProgress` as collectPages gives it.
 */
function takeListing(ws: string, prefix: string, onProgress?: (soFar: Collected<Entry>) => boolean | void): Promise<Collected<Entry>> {
  const hit = early?.key === `${ws}\0${prefix}` ? early.first : undefined;
  early = null;
  // A prefetch that failed (say, before logging in) is asked again, never shown as the answer.
  const first = hit?.catch(() => listPage(ws, prefix, undefined));
  return collectPages((cursor) => (cursor === undefined && first ? first : listPage(ws, prefix, cursor)), LIST_PAGES, onProgress);
}

let uploadIds = 0;

export function FilesPage({ me, ws, prefix }: { me: Me; ws: string; prefix: string }) {
  const role = roleIn(me, ws);
  const writable = canWrite(role);
  // `more`: the first pages of a long folder are shown while the rest arrives.
  const [listing, setListing] = useState<(Collected<Entry> & { more?: boolean }) | null>(null);
  const loads = useRef(0);
  const entries = listing?.items ?? null;
  const [error, setError] = useState<string | null>(null);
  /** Why the folder shown could not be downloaded as a zip (the toolbar's link). */
  const [zipError, setZipError] = useState<string | null>(null);
  /** The server's refusal of an action on a row, by the row's path (a folder's ends in `/`). */
  const [rowErrors, setRowErrors] = useState<ReadonlyMap<string, string>>(new Map());
  const setRowError = (error: { path: string; message: string } | null) => setRowErrors(new Map(error ? [[error.path, error.message]] : []));
  /** Files chosen for a bulk move or delete (their paths); a new folder starts with none. */
  const [selected, setSelected] = useState<ReadonlySet<string>>(new Set());
  const [movingSelected, setMovingSelected] = useState(false);
  /** A bulk action under way: what it does, and how far it is. */
  const [bulk, setBulk] = useState<BulkProgress<'move' | 'delete'> | null>(null);
  const [search, setSearch] = useState('');
  const [sort, setSort] = useState<{ key: SortKey; desc: boolean }>({ key: 'name', desc: false });
  const [uploads, setUploads] = useState<Upload[]>([]);
  const [dragging, setDragging] = useState(false);
  const [versionsOf, setVersionsOf] = useState<string | null>(null);
  const [previewOf, setPreviewOf] = useState<StoredObject | null>(null);
  const [renaming, setRenaming] = useState<{ path: string; folder: boolean } | null>(null);
  const [creatingFolder, setCreatingFolder] = useState(false);
  /** Folders being moved to the trash (their paths). */
  const [deleting, setDeleting] = useState<ReadonlySet<string>>(new Set());
  const fileInput = useRef<HTMLInputElement>(null);
  const members = useMembers(ws);

  /**
   * Lists the folder. On opening it (`shown` false) a long folder shows its first pages while the
   * rest arrives; a refresh of the listing on screen replaces it once whole (no shrinking table
   * under the reader). Only the newest load writes: an older one, or one of a folder left,
   * stops at its next page.
   */
  const load = useCallback(
    async (shown = true) => {
      const seq = ++loads.current;
      const current = () => seq === loads.current;
      try {
        const whole = await takeListing(ws, prefix, (soFar) => {
          if (!current()) return false;
          if (!shown) setListing({ ...soFar, more: true });
        });
        if (!current()) return;
        setListing(whole);
        setError(null);
      } catch (err) {
        if (current()) setError(describeError(err));
      }
    },
    [ws, prefix],
  );

  useEffect(() => {
    setListing(null);
    setVersionsOf(null);
    setPreviewOf(null);
    setRenaming(null);
    setCreatingFolder(false);
    setSelected(new Set());
    setMovingSelected(false);
    setRowErrors(new Map());
    setZipError(null);
    void load(false);
    // Leaving the folder (or the page) ends its load at the next page.
    return () => void loads.current++;
  }, [load]);
  // Files written meanwhile elsewhere (JupyterLab, a run, another member) show on coming back.
  useOnReturn(() => void load());

  // Sub-folders (name, files under it, whether that count is a lower bound) and the files directly in the folder.
  const { folders, files } = useMemo(() => {
    const folderList: [name: string, count: number, capped: boolean][] = [];
    const direct: StoredObject[] = [];
    for (const e of entries ?? []) {
      if (e.kind === 'folder') folderList.push([e.folder.path.slice(prefix.length, -1), e.folder.object_count, e.folder.object_count_capped]);
      else direct.push(e.object);
    }
    const q = search.trim().toLowerCase();
    const match = (name: string) => q === '' || name.toLowerCase().includes(q);
    const dir = sort.desc ? -1 : 1;
    const sorted = direct
      .filter((o) => match(o.path.slice(prefix.length)))
      .sort((a, b) => {
        if (sort.key === 'size') return (a.size - b.size) * dir;
        if (sort.key === 'updated') return a.updated_at.localeCompare(b.updated_at) * dir;
        return a.path.localeCompare(b.path) * dir;
      });
    const shown = folderList.filter(([n]) => match(n)).sort(([a], [b]) => a.localeCompare(b) * (sort.key === 'name' ? dir : 1));
    return { folders: shown, files: sorted };
  }, [entries, prefix, search, sort]);

  const startUploads = (list: FileList | File[]) => {
    for (const file of Array.from(list)) {
      const id = ++uploadIds;
      const path = prefix + file.name;
      const patch = (p: Partial<Upload>) => setUploads((all) => all.map((u) => (u.id === id ? { ...u, ...p } : u)));
      const handle = uploadFile(ws, path, file, (loaded, total) => patch({ loaded, total }));
      setUploads((all) => [...all, { id, name: file.name, path, loaded: 0, total: file.size, state: 'uploading', handle }]);
      handle.done.then(
        ({ status, body }) => {
          if (status === 200 || status === 201) {
            // The bar shows what XMLHttpRequest reported; its last progress event is the whole body.
            patch({ state: 'done' });
            void load();
          } else {
            let message = `The server answered ${status}.`;
            try {
              message = describeError(JSON.parse(body));
            } catch {
              /* not JSON: keep the status */
            }
            patch({ state: 'failed', error: message });
          }
        },
        (err: unknown) => patch({ state: 'cancelled', error: describeError(err) }),
      );
    }
  };

  const remove = async (path: string) => {
    setRowError(null);
    const problem = await trashObject(ws, path).catch((err: unknown) => describeError(err));
    if (problem) setRowError({ path, message: problem });
    else {
      if (versionsOf === path) setVersionsOf(null);
      await load();
    }
  };

  /**
   * A folder and everything in it to the trash (WebDAV `DELETE` of the folder, each file its own
   * trash entry as if deleted one by one), after the user confirms.
   */
  const removeFolder = async (name: string) => {
    setRowError(null);
    const path = prefix + name;
    if (!window.confirm(`Move the folder ${name} and everything in it to the trash? Its files can be restored from the trash.`)) return;
    // (A folder of thousands of files takes seconds: its row says so meanwhile.)
    setDeleting((all) => new Set(all).add(path));
    try {
      const res = await fetch(davUrl(ws, path), { method: 'DELETE', credentials: 'same-origin' });
      if (res.status !== 204) return setRowError({ path: `${path}/`, message: await davRefusal(res) });
    } catch (err) {
      return setRowError({ path: `${path}/`, message: describeError(err) });
    } finally {
      setDeleting((all) => {
        const rest = new Set(all);
        rest.delete(path);
        return rest;
      });
    }
    if (versionsOf?.startsWith(`${path}/`)) setVersionsOf(null);
    if (previewOf?.path.startsWith(`${path}/`)) setPreviewOf(null);
    await load();
  };

  // Only the files listed and shown (the search) can be acted on.
  const chosen = useMemo(() => files.filter((o) => selected.has(o.path)), [files, selected]);
  const allChosen = files.length > 0 && chosen.length === files.length;
  const toggle = (path: string) =>
    setSelected((all) => {
      const next = new Set(all);
      if (!next.delete(path)) next.add(path);
      return next;
    });

  /**
   * The chosen files one after the other: to the trash (the REST `DELETE`), or into a folder
   * (WebDAV `MOVE`, never over an existing file). The page says how far it is; each refusal
   * stays on its row, and those files stay selected.
   */
  const actOnChosen = async (action: 'move' | 'delete', folder = '') => {
    const list = chosen;
    if (list.length === 0 || bulk !== null) return;
    if (action === 'delete' && !window.confirm(`Move ${list.length.toLocaleString()} files to the trash?`)) return;
    setRowErrors(new Map());
    setBulk({ action, done: 0, total: list.length });
    const step = async (o: StoredObject): Promise<string | null> => {
      if (action === 'delete') return trashObject(ws, o.path);
      const to = `${folder === '' ? '' : `${folder}/`}${o.path.slice(o.path.lastIndexOf('/') + 1)}`;
      return to === o.path ? null : moveObject(ws, o.path, to);
    };
    const refused = await eachInTurn(
      list,
      (o) => o.path,
      step,
      (done) => setBulk({ action, done, total: list.length }),
    );
    setBulk(null);
    setSelected(new Set(refused.keys()));
    setRowErrors(refused);
    if (refused.size === 0) setMovingSelected(false);
    if (versionsOf !== null && !refused.has(versionsOf) && list.some((o) => o.path === versionsOf)) setVersionsOf(null);
    if (previewOf && !refused.has(previewOf.path) && list.some((o) => o.path === previewOf.path)) setPreviewOf(null);
    await load();
  };

  const onDrop = (e: DragEvent) => {
    e.preventDefault();
    setDragging(false);
    if (writable && e.dataTransfer.files.length > 0) startUploads(e.dataTransfer.files);
  };

  const crumbs = prefix.split('/').filter(Boolean);
  const sortButton = (key: SortKey, label: string) => (
    <button type="button" className="link" onClick={() => setSort((s) => ({ key, desc: s.key === key ? !s.desc : false }))}>
      {label}
      {sort.key === key ? (sort.desc ? ' ▼' : ' ▲') : ''}
    </button>
  );
  const ariaSort = (key: SortKey) => (sort.key === key ? (sort.desc ? 'descending' : 'ascending') : 'none');

  return (
    <section
      className={`files${dragging ? ' dragging' : ''}`}
      onDragOver={(e) => {
        if (!writable) return;
        e.preventDefault();
        setDragging(true);
      }}
      onDragLeave={() => setDragging(false)}
      onDrop={onDrop}
    >
      <WorkspaceHeader me={me} ws={ws} current="files" />
      <nav aria-label="Breadcrumbs" className="crumbs">
        <ol>
          <li>
            <Link to={filesPath(ws)} aria-current={crumbs.length === 0 ? 'page' : undefined}>
              All files
            </Link>
          </li>
          {crumbs.map((c, i) => (
            <li key={i}>
              <Link to={filesPath(ws, crumbs.slice(0, i + 1).join('/'))} aria-current={i === crumbs.length - 1 ? 'page' : undefined}>
                {c}
              </Link>
            </li>
          ))}
        </ol>
      </nav>
      <div className="toolbar">
        <label className="search">
          Search
          <input type="search" value={search} onChange={(e) => setSearch(e.target.value)} placeholder="Filter by name" />
        </label>
        {writable ? (
          <>
            <input
              ref={fileInput}
              type="file"
              multiple
              hidden
              aria-hidden="true"
              tabIndex={-1}
              data-testid="file-input"
              onChange={(e) => {
                if (e.target.files) startUploads(e.target.files);
                e.target.value = '';
              }}
            />
            <button type="button" onClick={() => fileInput.current?.click()}>
              Upload files
            </button>
            <span className="muted">or drop files here</span>
            <button type="button" className="secondary" onClick={() => setCreatingFolder((v) => !v)} aria-expanded={creatingFolder}>
              New folder
            </button>
          </>
        ) : (
          <span className="muted">Viewers can read and download; ask a workspace admin for the editor role to upload.</span>
        )}
        {entries !== null && entries.length > 0 ? (
          <ZipLink className="button secondary" ws={ws} prefix={prefix} onRefused={setZipError}>
            {prefix === '' ? 'Download all as zip' : 'Download folder as zip'}
          </ZipLink>
        ) : null}
      </div>
      {writable && creatingFolder ? <NewFolder ws={ws} prefix={prefix} onClose={() => setCreatingFolder(false)} /> : null}
      {uploads.length > 0 ? (
        <ul className="uploads" aria-label="Uploads">
          {uploads.map((u) => {
            const pct = u.total > 0 ? Math.floor((u.loaded / u.total) * 100) : 0;
            return (
              <li key={u.id} className={`upload upload-${u.state}`}>
                <span className="name">{u.name}</span>
                <progress max={100} value={pct} aria-label={`Upload of ${u.name}`}>
                  {pct} %
                </progress>
                <span className="pct" data-testid="upload-percent">
                  {pct} %
                </span>
                {u.state === 'uploading' ? (
                  <button type="button" className="secondary" onClick={() => u.handle?.cancel()} aria-label={`Cancel upload of ${u.name}`}>
                    Cancel
                  </button>
                ) : (
                  <span role="status">{u.state === 'done' ? 'Uploaded' : u.error}</span>
                )}
              </li>
            );
          })}
        </ul>
      ) : null}
      <ErrorText error={error} />
      <ErrorText error={zipError} />
      {entries === null && !error ? <p aria-busy="true">Loading files…</p> : null}
      {listing?.more ? (
        <p role="status" aria-busy="true">
          Loading the rest of this folder… {listing.items.length.toLocaleString()} files and folders so far.
        </p>
      ) : null}
      {listing !== null && !listing.complete && !listing.more ? (
        <p role="status">
          This folder holds more than {listing.items.length.toLocaleString()} files and folders: only those are listed here. Open a sub-folder, or use the
          workspace&apos;s WebDAV tree or its JupyterLab, to reach the others.
        </p>
      ) : null}
      {entries !== null && folders.length === 0 && files.length === 0 ? (
        <p className="empty">
          {search
            ? 'No file matches this search.'
            : writable
              ? 'No files here yet. Upload one with the button above, or drop files on this page.'
              : 'No files here yet.'}
        </p>
      ) : null}
      {writable && files.length > 0 ? (
        <div className="toolbar" role="group" aria-label="Selected files">
          <label className="inline">
            <input type="checkbox" checked={allChosen} onChange={() => setSelected(allChosen ? new Set() : new Set(files.map((o) => o.path)))} />{' '}
            {search.trim() === '' ? 'Select all files here' : 'Select all files that match'}
          </label>
          {chosen.length > 0 ? (
            <>
              <span>{chosen.length.toLocaleString()} selected</span>
              <button type="button" className="secondary" disabled={bulk !== null} onClick={() => setMovingSelected((v) => !v)} aria-expanded={movingSelected}>
                Move selected…
              </button>
              <button type="button" className="secondary danger" disabled={bulk !== null} onClick={() => void actOnChosen('delete')}>
                Delete selected
              </button>
            </>
          ) : null}
          {bulk ? (
            <span role="status" aria-busy="true">
              {bulk.action === 'move' ? 'Moving' : 'Moving to the trash'} {bulk.done.toLocaleString()} of {bulk.total.toLocaleString()}…
            </span>
          ) : null}
        </div>
      ) : null}
      {writable && movingSelected && chosen.length > 0 ? (
        <MoveSelected
          count={chosen.length}
          busy={bulk !== null}
          onMove={(folder) => void actOnChosen('move', folder)}
          onClose={() => setMovingSelected(false)}
        />
      ) : null}
      {entries !== null && (folders.length > 0 || files.length > 0) ? (
        <table className="listing files-table" aria-rowcount={folders.length + files.length + 1}>
          <caption className="visually-hidden">Files in {prefix || 'the workspace root'}</caption>
          <thead>
            <tr>
              <th scope="col" aria-sort={ariaSort('name')}>
                {sortButton('name', 'Name')}
              </th>
              <th scope="col" aria-sort={ariaSort('size')}>
                {sortButton('size', 'Size')}
              </th>
              <th scope="col" aria-sort={ariaSort('updated')}>
                {sortButton('updated', 'Modified')}
              </th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <Rows
            count={folders.length + files.length}
            row={(i, at) => {
              if (i < folders.length) {
                const [name, count, capped] = folders[i]!;
                return (
                  <tr key={`d:${name}`} {...at}>
                    <td>
                      <Link to={filesPath(ws, prefix + name)}>📁 {name}/</Link>
                      <ErrorText error={rowErrors.get(`${prefix + name}/`)} />
                    </td>
                    <td>
                      {count.toLocaleString()}
                      {capped ? '+' : ''} {count === 1 && !capped ? 'file' : 'files'}
                    </td>
                    <td />
                    <td className="actions">
                      <ZipLink
                        ws={ws}
                        prefix={`${prefix + name}/`}
                        label={`Download folder ${name} as zip`}
                        onRefused={(message) => setRowError(message === null ? null : { path: `${prefix + name}/`, message })}
                      >
                        Download
                      </ZipLink>
                      {deleting.has(prefix + name) ? (
                        <span role="status" aria-busy="true">
                          Moving to the trash…
                        </span>
                      ) : writable ? (
                        <>
                          <button
                            type="button"
                            className="link"
                            onClick={() => setRenaming({ path: prefix + name, folder: true })}
                            aria-label={`Rename folder ${name}`}
                          >
                            Rename
                          </button>
                          <button type="button" className="link danger" onClick={() => void removeFolder(name)} aria-label={`Delete folder ${name}`}>
                            Delete
                          </button>
                        </>
                      ) : null}
                    </td>
                  </tr>
                );
              }
              const o = files[i - folders.length]!;
              const name = o.path.slice(prefix.length);
              return (
                <tr key={o.path} {...at}>
                  <td>
                    {writable ? (
                      <input type="checkbox" className="select" checked={selected.has(o.path)} onChange={() => toggle(o.path)} aria-label={`Select ${name}`} />
                    ) : null}{' '}
                    <a href={objectUrl(ws, o.path)} download={name}>
                      {name}
                    </a>
                    <ErrorText error={rowErrors.get(o.path)} />
                  </td>
                  <td>{formatBytes(o.size)}</td>
                  <td>
                    {formatTime(o.updated_at)}
                    <By id={o.updated_by} members={members} />
                  </td>
                  <td className="actions">
                    <button type="button" className="link" onClick={() => setPreviewOf(o)} aria-label={`Preview ${name}`}>
                      Preview
                    </button>
                    {o.path.toLowerCase().endsWith('.ipynb') ? (
                      <a href={jupyterPath(ws, o.path)} aria-label={`Open in JupyterLab: ${name}`}>
                        Open in JupyterLab
                      </a>
                    ) : null}
                    <a href={objectUrl(ws, o.path)} download={name} aria-label={`Download ${name}`}>
                      Download
                    </a>
                    <button type="button" className="link" onClick={() => setVersionsOf(o.path)} aria-label={`Versions of ${name}`}>
                      Versions
                    </button>
                    {writable ? (
                      <button type="button" className="link" onClick={() => setRenaming({ path: o.path, folder: false })} aria-label={`Rename ${name}`}>
                        Rename
                      </button>
                    ) : null}
                    {writable ? (
                      <button type="button" className="link danger" onClick={() => void remove(o.path)} aria-label={`Delete ${name}`}>
                        Delete
                      </button>
                    ) : null}
                  </td>
                </tr>
              );
            }}
          />
        </table>
      ) : null}
      {renaming ? (
        <Rename
          key={renaming.path}
          ws={ws}
          path={renaming.path}
          folder={renaming.folder}
          onClose={() => setRenaming(null)}
          onRenamed={async () => {
            setRenaming(null);
            // What was shown of the file, or of a file in the folder, is at another path now.
            const moved = (p: string) => (renaming.folder ? p.startsWith(`${renaming.path}/`) : p === renaming.path);
            if (previewOf && moved(previewOf.path)) setPreviewOf(null);
            if (versionsOf !== null && moved(versionsOf)) setVersionsOf(null);
            await load();
          }}
        />
      ) : null}
      {previewOf ? (
        <PartBoundary key={previewOf.path} what="preview">
          <Suspense fallback={<p aria-busy="true">Loading the preview…</p>}>
            <Preview
              key={previewOf.path}
              ws={ws}
              path={previewOf.path}
              size={previewOf.size}
              contentType={previewOf.content_type}
              onClose={() => setPreviewOf(null)}
            />
          </Suspense>
        </PartBoundary>
      ) : null}
      {versionsOf ? <Versions ws={ws} path={versionsOf} writable={writable} members={members} onClose={() => setVersionsOf(null)} onRestored={load} /> : null}
    </section>
  );
}

/** Up to this many rows a listing is rendered whole; beyond it, only the rows near the window (decision 0153). */
const RENDER_ALL_UP_TO = 150;
/** A row's height before it is measured (one line of text with its buttons). */
const ROW_ESTIMATE_PX = 38;

/** What a row must carry: its position in the table for assistive technology, and, when windowed, what measures it. */
interface RowAttributes {
  'aria-rowindex': number;
  'data-index'?: number;
  ref?: Ref<HTMLTableRowElement>;
}

/**
 * The listing's rows. A folder of a few hundred files is rendered whole (the browser's find, and
 * the Tab key, reach every row). A larger one is windowed: only the rows in and near the window
 * are in the page, between two spacer rows that keep the scroll bar and the table's height those
 * of the whole listing, so the first screen shows as soon as the listing has arrived instead of
 * after building every row (1000 rows cost about 1.2 s of main thread; issue 16's budget for the
 * whole first load is 1 s). Search and sort still work on every file.
 */
function Rows({ count, row }: { count: number; row: (i: number, at: RowAttributes) => ReactElement }) {
  if (count <= RENDER_ALL_UP_TO) return <tbody>{Array.from({ length: count }, (_, i) => row(i, { 'aria-rowindex': i + 2 }))}</tbody>;
  return <WindowedRows count={count} row={row} />;
}

function WindowedRows({ count, row }: { count: number; row: (i: number, at: RowAttributes) => ReactElement }) {
  const body = useRef<HTMLTableSectionElement>(null);
  // Where the rows start in the page: what is above the table (uploads, panels) moves them.
  const [margin, setMargin] = useState(0);
  useLayoutEffect(() => {
    const top = (body.current?.getBoundingClientRect().top ?? 0) + window.scrollY;
    if (Math.abs(top - margin) >= 1) setMargin(top);
  });
  const windowed = useWindowVirtualizer({ count, estimateSize: () => ROW_ESTIMATE_PX, overscan: 20, scrollMargin: margin });
  const items = windowed.getVirtualItems();
  const first = items[0];
  const last = items[items.length - 1];
  const above = first ? first.start - margin : 0;
  const below = last ? windowed.getTotalSize() - (last.end - margin) : 0;
  const spacer = (px: number) =>
    px > 0 ? (
      <tr aria-hidden="true" className="spacer">
        <td colSpan={4} style={{ height: px }} />
      </tr>
    ) : null;
  return (
    <tbody ref={body}>
      {spacer(above)}
      {items.map((item) => row(item.index, { 'aria-rowindex': item.index + 2, 'data-index': item.index, ref: windowed.measureElement }))}
      {spacer(below)}
    </tbody>
  );
}

function Versions({
  ws,
  path,
  writable,
  members,
  onClose,
  onRestored,
}: {
  ws: string;
  path: string;
  writable: boolean;
  members: Members;
  onClose: () => void;
  onRestored: () => Promise<void>;
}) {
  const [listed, setListed] = useState<Collected<VersionItem> | null>(null);
  const items = listed?.items ?? null;
  const [error, setError] = useState<string | null>(null);
  const heading = useRef<HTMLHeadingElement>(null);

  // Every save keeps a version: the list is paged (decision 0208), read here up to LIST_MAX_PAGES.
  const load = useCallback(async () => {
    const answer = await loadPages(async (page): Promise<Answer<Page<VersionItem>>> => {
      const { data, error: err } = await api.GET('/api/v1/data-resources/{ws}/versions/{*}', {
        params: { path: { ws, '*': path }, query: page },
        parseAs: 'json',
      });
      // The route also serves a version's raw content (`*/*`); this call asks for the list (JSON).
      return err ? { error: err } : { data: data as Page<VersionItem> };
    });
    if (answer.data) setListed(answer.data);
    else setError(describeError(answer.error));
  }, [ws, path]);

  useEffect(() => {
    void load();
    heading.current?.focus();
  }, [load]);

  const restore = async (versionId: string) => {
    setError(null);
    const { error: err } = await api.POST('/api/v1/data-resources/{ws}/versions/{*}', {
      params: { path: { ws, '*': `${path}/restore` } },
      body: { version_id: versionId },
    });
    if (err) setError(describeError(err));
    else {
      await load();
      await onRestored();
    }
  };

  return (
    <aside className="panel" aria-labelledby="versions-heading">
      <h2 id="versions-heading" ref={heading} tabIndex={-1}>
        Versions of {path}
      </h2>
      <ErrorText error={error} />
      {items === null && !error ? <p aria-busy="true">Loading…</p> : null}
      {items?.length === 0 ? <p className="empty">No versions yet: replacing the file keeps the old content here.</p> : null}
      {listed?.complete === false ? <MoreThan count={listed.items.length} what="versions" order="(newest first)" /> : null}
      {items && items.length > 0 ? (
        <ol className="versions">
          {items.map((v) => (
            <li key={v.version_id}>
              <span>
                {formatTime(v.created_at)}
                <By id={v.created_by} members={members} />
              </span>{' '}
              <span>{formatBytes(v.size)}</span> {v.current ? <strong>current</strong> : null}{' '}
              <a href={objectUrl(ws, path, v.version_id)} download>
                Download
              </a>{' '}
              {writable && !v.current ? (
                <button type="button" className="link" onClick={() => void restore(v.version_id)}>
                  Restore
                </button>
              ) : null}
            </li>
          ))}
        </ol>
      ) : null}
      <button type="button" className="secondary" onClick={onClose}>
        Close
      </button>
    </aside>
  );
}

/**
 * Rename or move a file or a folder within the workspace: WebDAV `MOVE` of the existing tree
 * (decision 0150; the REST API has no move). The rows and their versions change path;
 * `Overwrite: F`, so what exists at the new path is never replaced from here (412, said in words).
 */
async function moveObject(ws: string, from: string, to: string): Promise<string | null> {
  const res = await fetch(davUrl(ws, from), {
    method: 'MOVE',
    credentials: 'same-origin',
    headers: { destination: new URL(davUrl(ws, to), window.location.origin).href, overwrite: 'F' },
  });
  if (res.status === 201 || res.status === 204) return null;
  if (res.status === 412) return `${to} already exists: choose another name, or delete what is there first.`;
  return davRefusal(res);
}

/** A file to the trash (the REST `DELETE`); the refusal in words, or null. */
async function trashObject(ws: string, path: string): Promise<string | null> {
  const { error } = await api.DELETE('/api/v1/data-resources/{ws}/objects/{*}', { params: { path: { ws, '*': path } } });
  return error ? describeError(error) : null;
}

/** A path of the workspace's WebDAV tree (the file browser's moves and new folders). */
const davUrl = (ws: string, path: string) => `/api/v1/dav/${encodeURIComponent(ws)}/${encodePath(path)}`;

/**
 * A folder (or, for `prefix` '', the workspace) as one zip file. Asked with `HEAD` first (decision
 * 0229): a refusal (too many files, two downloads under way already, nothing left in the folder)
 * is then said on the page by `onRefused` instead of being saved by the browser as a file; then
 * the browser downloads it as any attachment, with its own progress, and the page stays. A
 * middle click or a modifier keeps the browser's own handling of the link.
 */
function ZipLink(props: { ws: string; prefix: string; className?: string; label?: string; onRefused: (message: string | null) => void; children: ReactNode }) {
  const { ws, prefix, className, label, onRefused, children } = props;
  const url = archiveUrl(ws, prefix);
  const [asking, setAsking] = useState(false);
  const click = async (e: MouseEvent<HTMLAnchorElement>) => {
    if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    if (asking) return;
    setAsking(true);
    try {
      const res = await fetch(url, { method: 'HEAD', credentials: 'same-origin' });
      if (!res.ok) return onRefused(zipRefusal(res.status, prefix));
      onRefused(null);
      // (A link of its own, with `download`: should the GET be refused after all, the browser
      // reports a failed download and never shows the refusal as a page.)
      const link = document.createElement('a');
      link.href = url;
      link.download = '';
      link.hidden = true;
      document.body.append(link);
      link.click();
      link.remove();
    } catch (err) {
      onRefused(describeError(err));
    } finally {
      setAsking(false);
    }
  };
  return (
    <a className={className} href={url} download aria-label={label} aria-busy={asking || undefined} onClick={(e) => void click(e)}>
      {children}
    </a>
  );
}

/** Why a zip download was refused, from the status of the `HEAD` (it has no body to read). */
function zipRefusal(status: number, prefix: string): string {
  const what = prefix === '' ? 'The workspace' : `${prefix.slice(0, -1).split('/').pop() ?? ''}/`;
  switch (status) {
    case 400:
      return `${what} holds too many files for one zip: download its folders one by one, or copy it with rclone over WebDAV.`;
    case 404:
      return `${what} holds no files any more: nothing to download.`;
    case 429:
      return 'You are downloading as many folders as one may at once: wait until one has finished.';
    case 401:
      return 'Your session has ended: log in again to download.';
    default:
      return `The download was refused (the server answered ${status}).`;
  }
}

/** A WebDAV refusal in words: the API's error body, else the status. */
async function davRefusal(res: Response): Promise<string> {
  return res.json().then(describeError, () => `The server answered ${res.status}.`);
}

/**
 * A new, empty folder in the folder shown: WebDAV `MKCOL` (the platform keeps an empty folder as a
 * marker object, decision 0070), then the new folder is opened, ready for uploads.
 */
function NewFolder({ ws, prefix, onClose }: { ws: string; prefix: string; onClose: () => void }) {
  const [name, setName] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const folder = name.trim();
    if (folder === '') return setError('Give the folder a name.');
    if (folder.includes('/')) return setError('One folder at a time: a name without /.');
    setBusy(true);
    setError(null);
    try {
      const res = await fetch(davUrl(ws, prefix + folder), { method: 'MKCOL', credentials: 'same-origin' });
      if (res.status === 201) return navigate(filesPath(ws, prefix + folder));
      if (res.status === 405) return setError(`${folder} exists already here: choose another name.`);
      setError(await davRefusal(res));
    } catch (err) {
      setError(describeError(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form className="toolbar" aria-label="New folder" onSubmit={(e) => void submit(e)}>
      <label>
        Folder name
        <input value={name} onChange={(e) => setName(e.target.value)} autoFocus spellCheck={false} />
      </label>
      <button type="submit" disabled={busy}>
        Create folder
      </button>
      <button type="button" className="secondary" onClick={onClose}>
        Cancel
      </button>
      <ErrorText error={error} />
    </form>
  );
}

/** Where the selected files go: a folder of the workspace (made if it does not exist; empty: the top). */
function MoveSelected({ count, busy, onMove, onClose }: { count: number; busy: boolean; onMove: (folder: string) => void; onClose: () => void }) {
  const [folder, setFolder] = useState('');
  return (
    <form
      className="toolbar"
      aria-label="Move selected files"
      onSubmit={(e) => {
        e.preventDefault();
        onMove(folder.trim().replace(/^\/+|\/+$/g, ''));
      }}
    >
      <label>
        Into the folder
        <input
          value={folder}
          onChange={(e) => setFolder(e.target.value)}
          placeholder="e.g. archive/2025"
          aria-describedby="move-selected-hint"
          autoFocus
          spellCheck={false}
        />
      </label>
      <span id="move-selected-hint" className="hint">
        A folder of this workspace (new or not); empty: the top.
      </span>
      <button type="submit" disabled={busy}>
        Move {count.toLocaleString()} {count === 1 ? 'file' : 'files'}
      </button>
      <button type="button" className="secondary" onClick={onClose}>
        Cancel
      </button>
    </form>
  );
}

function Rename({ ws, path, folder, onClose, onRenamed }: { ws: string; path: string; folder: boolean; onClose: () => void; onRenamed: () => Promise<void> }) {
  const [to, setTo] = useState(path);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => input.current?.focus(), []);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const trimmed = to.trim().replace(/^\/+/, '');
    // (A folder's new path may be written with its closing slash.)
    const target = folder ? trimmed.replace(/\/+$/, '') : trimmed;
    if (target === '' || target === path) return onClose();
    setBusy(true);
    setError(null);
    const problem = await moveObject(ws, path, target).catch((err: unknown) => describeError(err));
    setBusy(false);
    if (problem) setError(problem);
    else await onRenamed();
  };
  return (
    <aside className="panel" aria-labelledby="rename-heading">
      <h2 id="rename-heading">
        Rename or move {path}
        {folder ? '/' : ''}
      </h2>
      <form className="stack" aria-label={`Rename ${path}`} onSubmit={(e) => void submit(e)}>
        <label>
          New path
          <input ref={input} value={to} onChange={(e) => setTo(e.target.value)} aria-describedby="rename-hint" />
        </label>
        <p id="rename-hint" className="hint">
          {folder
            ? 'A path in this workspace: the folder moves there with everything in it, and its files keep their versions.'
            : 'A path in this workspace; a new folder name moves the file there. Its versions go with it.'}
        </p>
        <ErrorText error={error} />
        <div className="toolbar">
          <button type="submit" disabled={busy}>
            Rename
          </button>
          <button type="button" className="secondary" onClick={onClose}>
            Cancel
          </button>
        </div>
      </form>
    </aside>
  );
}
