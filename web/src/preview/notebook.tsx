/**
 * A notebook rendered read-only, as text: cell sources, stream and plain-text results, errors with
 * their tracebacks (ANSI colours stripped), and PNG/JPEG/GIF outputs as `data:` images. Nothing a
 * notebook holds is ever inserted as HTML: markdown is shown as its source, and `text/html`,
 * `image/svg+xml` and JavaScript outputs are named, not rendered (a notebook is user content; the
 * app's origin must not run its markup). React escapes every string.
 */
type Multiline = string | string[] | undefined;
interface Output {
  output_type?: string;
  name?: string;
  text?: Multiline;
  data?: Record<string, unknown>;
  ename?: string;
  evalue?: string;
  traceback?: string[];
}
interface Cell {
  cell_type?: string;
  source?: Multiline;
  outputs?: Output[];
  execution_count?: number | null;
}
export interface NotebookJson {
  cells?: Cell[];
}

const RASTER = ['image/png', 'image/jpeg', 'image/gif'] as const;
const UNRENDERED = ['text/html', 'image/svg+xml', 'application/javascript', 'text/markdown', 'text/latex'];

export const joinText = (t: unknown): string => (Array.isArray(t) ? t.map(String).join('') : typeof t === 'string' ? t : '');
// eslint-disable-next-line no-control-regex -- ANSI escape sequences of tracebacks
export const stripAnsi = (s: string): string => s.replace(/\u001b\[[0-9;?]*[ -/]*[@-~]/g, '');

/** A base64 image payload as a `data:` URL, or null when it is not plain base64 (never a crafted URL). */
export function imageDataUrl(type: string, payload: unknown): string | null {
  const b64 = joinText(payload).replace(/\s+/g, '');
  if (b64 === '' || !/^[A-Za-z0-9+/]+={0,2}$/.test(b64)) return null;
  return `data:${type};base64,${b64}`;
}

/** Parses notebook JSON; throws an Error with words when it is not a notebook. */
export function parseNotebook(text: string): NotebookJson {
  let nb: NotebookJson | null;
  try {
    nb = JSON.parse(text) as NotebookJson | null;
  } catch {
    throw new Error('This file is not valid JSON, so it cannot be shown as a notebook. Download it to inspect it.');
  }
  if (!nb || typeof nb !== 'object' || !Array.isArray(nb.cells)) throw new Error('This file has no notebook cells.');
  return nb;
}

function OutputView({ output }: { output: Output }) {
  const kind = output.output_type;
  if (kind === 'stream') {
    return <pre className={`nb-out nb-stream${output.name === 'stderr' ? ' nb-stderr' : ''}`}>{joinText(output.text)}</pre>;
  }
  if (kind === 'error') {
    const tb = (output.traceback ?? []).map((l) => stripAnsi(String(l))).join('\n');
    return (
      <div className="nb-out nb-error" role="group" aria-label={`Error ${output.ename ?? ''}`}>
        <p className="error">
          {output.ename}: {output.evalue}
        </p>
        {tb ? <pre>{tb}</pre> : null}
      </div>
    );
  }
  const data = output.data ?? {};
  for (const type of RASTER) {
    if (type in data) {
      const src = imageDataUrl(type, data[type]);
      const alt = joinText(data['text/plain']) || 'Image output of the cell';
      if (src) return <img className="nb-out nb-image" src={src} alt={alt} />;
    }
  }
  if ('text/plain' in data) return <pre className="nb-out">{joinText(data['text/plain'])}</pre>;
  const hidden = UNRENDERED.filter((t) => t in data);
  if (hidden.length > 0) return <p className="nb-out muted">({hidden.join(', ')} output not shown here: open the notebook in JupyterLab)</p>;
  return null;
}

export function NotebookView({ notebook, label }: { notebook: NotebookJson; label: string }) {
  const cells = notebook.cells ?? [];
  return (
    <div className="notebook" role="region" aria-label={label}>
      {cells.length === 0 ? <p className="empty">This notebook has no cells.</p> : null}
      {cells.map((cell, i) => (
        <div key={i} className={`nb-cell nb-${cell.cell_type ?? 'unknown'}`}>
          {cell.cell_type === 'code' ? (
            <>
              <div className="nb-prompt" aria-hidden="true">
                [{cell.execution_count ?? ' '}]
              </div>
              <pre className="nb-source">
                <code>{joinText(cell.source)}</code>
              </pre>
              {(cell.outputs ?? []).map((o, j) => (
                <OutputView key={j} output={o} />
              ))}
            </>
          ) : (
            <pre className="nb-text">{joinText(cell.source)}</pre>
          )}
        </div>
      ))}
    </div>
  );
}
