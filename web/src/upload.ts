import { encodePath } from './nav';

export interface UploadHandle {
  done: Promise<{ status: number; body: string }>;
  cancel(): void;
}

/**
 * Uploads sent at once; the others wait their turn, in order. The platform takes 16 uploads of
 * one user at a time and refuses more (decision 0256), and over HTTP/2 a browser would send
 * every dropped file at once.
 */
export const PARALLEL_UPLOADS = 4;
let sending = 0;
const waiting: Array<() => void> = [];

/** Runs `start` now if a place is free, else once one is; says how to leave the queue before then. */
function inTurn(start: () => void): () => void {
  const go = () => {
    sending++;
    start();
  };
  if (sending < PARALLEL_UPLOADS) {
    go();
    return () => undefined;
  }
  waiting.push(go);
  return () => {
    const at = waiting.indexOf(go);
    if (at >= 0) waiting.splice(at, 1);
  };
}

/** An upload ended (however): the next waiting one starts. */
function ended(): void {
  sending--;
  waiting.shift()?.();
}

/**
 * Uploads one file as the raw body of `PUT …/objects/{path}` with XMLHttpRequest, the one browser
 * API that reports upload progress, once its turn comes (PARALLEL_UPLOADS). The cookie goes
 * along (same origin); the browser adds `Sec-Fetch-Site: same-origin`, which the backend's
 * same-origin rule wants.
 */
export function uploadFile(ws: string, path: string, file: Blob, onProgress: (loaded: number, total: number) => void): UploadHandle {
  const xhr = new XMLHttpRequest();
  let started = false;
  let rejectWaiting: (err: Error) => void = () => undefined;
  const done = new Promise<{ status: number; body: string }>((resolve, reject) => {
    rejectWaiting = reject;
    const finish = () => {
      if (started) ended();
      started = false;
    };
    xhr.upload.onprogress = (e) => onProgress(e.loaded, e.lengthComputable ? e.total : file.size);
    xhr.onload = () => {
      finish();
      resolve({ status: xhr.status, body: xhr.responseText });
    };
    xhr.onerror = () => {
      finish();
      reject(new Error('The upload failed: the connection to the platform broke. Try again.'));
    };
    xhr.onabort = () => {
      finish();
      reject(new Error('Upload cancelled.'));
    };
  });
  const leaveQueue = inTurn(() => {
    started = true;
    xhr.open('PUT', `/api/v1/data-resources/${encodeURIComponent(ws)}/objects/${encodePath(path)}`);
    xhr.setRequestHeader('content-type', file.type || 'application/octet-stream');
    xhr.send(file);
  });
  return {
    done,
    cancel: () => {
      if (started) return xhr.abort();
      leaveQueue();
      rejectWaiting(new Error('Upload cancelled.'));
    },
  };
}
