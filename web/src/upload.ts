import { encodePath } from './nav';

export interface UploadHandle {
  done: Promise<{ status: number; body: string }>;
  cancel(): void;
}

/**
 * Uploads one file as the raw body of `PUT …/objects/{path}` with XMLHttpRequest, the one browser
 * API that reports upload progress. The cookie goes along (same origin); the browser adds
 * `Sec-Fetch-Site: same-origin`, which the backend's same-origin rule wants.
 */
export function uploadFile(ws: string, path: string, file: Blob, onProgress: (loaded: number, total: number) => void): UploadHandle {
  const xhr = new XMLHttpRequest();
  const done = new Promise<{ status: number; body: string }>((resolve, reject) => {
    xhr.upload.onprogress = (e) => onProgress(e.loaded, e.lengthComputable ? e.total : file.size);
    xhr.onload = () => resolve({ status: xhr.status, body: xhr.responseText });
    xhr.onerror = () => reject(new Error('The upload failed: the connection to the platform broke. Try again.'));
    xhr.onabort = () => reject(new Error('Upload cancelled.'));
  });
  xhr.open('PUT', `/api/v1/data-resources/${encodeURIComponent(ws)}/objects/${encodePath(path)}`);
  xhr.setRequestHeader('content-type', file.type || 'application/octet-stream');
  xhr.send(file);
  return { done, cancel: () => xhr.abort() };
}
