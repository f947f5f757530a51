import { useEffect, useRef, useState } from 'react';
import { api, describeError, objectUrl, type Run } from '../api/client';
import { ErrorText, formatTime } from '../components';
import { jupyterPath } from '../nav';
import { NotebookView, parseNotebook, type NotebookJson } from '../preview/notebook';

/** One line of the run log (JSON lines of timestamped events, docs/contract/spec.md §7) for people. */
function logLine(line: string): string {
  try {
    const { time, event, ...rest } = JSON.parse(line) as Record<string, unknown>;
    const extra = Object.entries(rest)
      .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
      .join(' ');
    return `${typeof time === 'string' ? formatTime(time) : ''}  ${typeof event === 'string' ? event : JSON.stringify(event ?? '')}${extra ? `  ${extra}` : ''}`;
  } catch {
    return line;
  }
}

/**
 * A run's log and its executed notebook (`output_path`, written next to the source), rendered
 * read-only as text with its errors and images (lazy-loaded with the notebook renderer).
 */
export default function RunDetail({ ws, run, onClose }: { ws: string; run: Run; onClose: () => void }) {
  const [log, setLog] = useState<string | null>(null);
  const [notebook, setNotebook] = useState<NotebookJson | null>(null);
  const [nbError, setNbError] = useState<string | null>(null);
  const heading = useRef<HTMLHeadingElement>(null);

  useEffect(() => {
    heading.current?.focus();
    let live = true;
    void api.GET('/api/v1/workspaces/{ws}/runs/{id}/log', { params: { path: { ws, id: run.id } }, parseAs: 'text' }).then(({ data, error }) => {
      if (live) setLog(error ? describeError(error) : (data ?? ''));
    });
    setNotebook(null);
    setNbError(null);
    if (run.output_path) {
      fetch(objectUrl(ws, run.output_path), { credentials: 'same-origin' })
        .then(async (res) => {
          if (!res.ok) throw new Error(res.status === 404 ? 'The executed notebook is gone (deleted or moved).' : `The server answered ${res.status}.`);
          return parseNotebook(await res.text());
        })
        .then(
          (nb) => live && setNotebook(nb),
          (err: unknown) => live && setNbError(describeError(err)),
        );
    }
    return () => {
      live = false;
    };
  }, [ws, run.id, run.output_path]);

  return (
    <aside className="panel" aria-label="Run log and output">
      <h3 ref={heading} tabIndex={-1}>
        Run of {run.notebook_path} ({run.status})
      </h3>
      <h4>Log</h4>
      {log === null ? <p aria-busy="true">Loading…</p> : <pre className="log">{log.trim() ? log.trim().split('\n').map(logLine).join('\n') : '(empty)'}</pre>}
      <h4>Executed notebook</h4>
      {run.output_path ? (
        <p>
          <a href={objectUrl(ws, run.output_path)} download>
            Download {run.output_path}
          </a>{' '}
          · <a href={jupyterPath(ws, run.output_path)}>Open it in JupyterLab</a>
        </p>
      ) : (
        <p className="muted">{run.status === 'queued' || run.status === 'running' ? 'Written when the run ends.' : 'This run wrote no notebook.'}</p>
      )}
      <ErrorText error={nbError} />
      {notebook ? <NotebookView notebook={notebook} label="Executed notebook" /> : null}
      <button type="button" className="secondary" onClick={onClose}>
        Close
      </button>
    </aside>
  );
}
