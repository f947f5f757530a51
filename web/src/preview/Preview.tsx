import { useEffect, useRef, useState } from 'react';
import { objectUrl } from '../api/client';
import { ErrorText, formatBytes } from '../components';
import { parseCsv } from './csv';
import { PREVIEW_BYTES, previewKind } from './kind';
import { NotebookView, parseNotebook, type NotebookJson } from './notebook';

type Loaded =
  | { kind: 'loading' }
  | { kind: 'error'; message: string }
  | { kind: 'text'; text: string; truncated: boolean }
  | { kind: 'csv'; rows: string[][]; more: boolean }
  | { kind: 'notebook'; notebook: NotebookJson }
  | { kind: 'image' }
  | { kind: 'none' };

const CSV_ROWS = 100;

/** The start (or all) of an object's content as text; a Range request for large files. */
async function readText(ws: string, path: string, size: number, limit: number, signal: AbortSignal): Promise<{ text: string; truncated: boolean }> {
  const truncated = size > limit;
  const res = await fetch(objectUrl(ws, path), { credentials: 'same-origin', signal, headers: truncated ? { range: `bytes=0-${limit - 1}` } : {} });
  if (!res.ok) throw new Error(res.status === 404 ? 'Not found: it may have been deleted or moved.' : `The server answered ${res.status}.`);
  const bytes = new Uint8Array(await res.arrayBuffer());
  return { text: new TextDecoder('utf-8', { fatal: false }).decode(bytes.subarray(0, limit)), truncated };
}

/**
 * The preview panel of one file (lazy-loaded: its code is not part of the initial JavaScript).
 * Text, CSV (first rows as a table), raster images and notebooks (read-only, as text); HTML and
 * SVG as their source. Never markup of the user's in the app's origin.
 */
export default function Preview({
  ws,
  path,
  size,
  contentType,
  onClose,
}: {
  ws: string;
  path: string;
  size: number;
  contentType: string;
  onClose: () => void;
}) {
  const kind = previewKind(path, contentType);
  const [loaded, setLoaded] = useState<Loaded>({ kind: 'loading' });
  const heading = useRef<HTMLHeadingElement>(null);

  useEffect(() => {
    heading.current?.focus();
    const ctl = new AbortController();
    setLoaded({ kind: 'loading' });
    const run = async (): Promise<Loaded> => {
      if (kind === 'image') return { kind: 'image' };
      if (kind === 'none') return { kind: 'none' };
      if (kind === 'notebook') {
        if (size > PREVIEW_BYTES.notebook)
          return { kind: 'error', message: `This notebook is ${formatBytes(size)}: too large to preview here. Open it in JupyterLab.` };
        const { text } = await readText(ws, path, size, PREVIEW_BYTES.notebook, ctl.signal);
        return { kind: 'notebook', notebook: parseNotebook(text) };
      }
      if (kind === 'csv') {
        const { text } = await readText(ws, path, size, PREVIEW_BYTES.csv, ctl.signal);
        const { rows, more } = parseCsv(text, CSV_ROWS, path.toLowerCase().endsWith('.tsv') ? '\t' : ',');
        return { kind: 'csv', rows, more: more || size > PREVIEW_BYTES.csv };
      }
      const { text, truncated } = await readText(ws, path, size, PREVIEW_BYTES.text, ctl.signal);
      return { kind: 'text', text, truncated };
    };
    run().then(setLoaded, (err: unknown) => {
      if (!ctl.signal.aborted) setLoaded({ kind: 'error', message: err instanceof Error ? err.message : 'The preview failed.' });
    });
    return () => ctl.abort();
  }, [ws, path, size, kind]);

  const name = path.slice(path.lastIndexOf('/') + 1);
  return (
    <aside className="panel preview" aria-labelledby="preview-heading">
      <h2 id="preview-heading" ref={heading} tabIndex={-1}>
        Preview of {path}
      </h2>
      {loaded.kind === 'loading' ? <p aria-busy="true">Loading…</p> : null}
      {loaded.kind === 'error' ? <ErrorText error={loaded.message} /> : null}
      {loaded.kind === 'none' ? <p className="empty">No preview for this type of file ({contentType}). Download it to open it.</p> : null}
      {loaded.kind === 'image' ? <img className="preview-image" src={objectUrl(ws, path)} alt={`Preview of ${name}`} /> : null}
      {loaded.kind === 'text' ? (
        <>
          <pre className="preview-text" data-testid="preview-text">
            {loaded.text}
          </pre>
          {loaded.truncated ? (
            <p className="muted">
              Showing the first {formatBytes(PREVIEW_BYTES.text)} of {formatBytes(size)}.
            </p>
          ) : null}
        </>
      ) : null}
      {loaded.kind === 'csv' ? (
        loaded.rows.length === 0 ? (
          <p className="empty">This file is empty.</p>
        ) : (
          <div className="scroll">
            <table className="listing csv">
              <caption className="visually-hidden">First rows of {name}</caption>
              <thead>
                <tr>
                  {loaded.rows[0]!.map((h, i) => (
                    <th key={i} scope="col">
                      {h}
                    </th>
                  ))}
                </tr>
              </thead>
              <tbody>
                {loaded.rows.slice(1).map((r, i) => (
                  <tr key={i}>
                    {r.map((c, j) => (
                      <td key={j}>{c}</td>
                    ))}
                  </tr>
                ))}
              </tbody>
            </table>
            {loaded.more ? <p className="muted">Showing the first {CSV_ROWS - 1} rows.</p> : null}
          </div>
        )
      ) : null}
      {loaded.kind === 'notebook' ? <NotebookView notebook={loaded.notebook} label={`Cells of ${name}`} /> : null}
      <p className="toolbar">
        <a href={objectUrl(ws, path)} download={name}>
          Download
        </a>
        <button type="button" className="secondary" onClick={onClose}>
          Close
        </button>
      </p>
    </aside>
  );
}
