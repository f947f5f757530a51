/**
 * What the file browser previews, and how (decision 0150). Only raster images the server serves
 * inline (object-headers.ts: PNG, JPEG, GIF, WebP) are shown as <img>; SVG and HTML are shown as
 * their source text, never rendered, so no user markup runs in the app's origin.
 */
export type PreviewKind = 'notebook' | 'csv' | 'image' | 'text' | 'none';

const RASTER = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);
const TEXT_TYPES = /^(text\/|application\/(json|xml|x-yaml|yaml|toml|javascript|x-sh|x-python|sql|x-ndjson)\b|image\/svg\+xml)/;
const TEXT_EXT = /\.(txt|md|markdown|py|r|jl|sql|json|ndjson|jsonl|yaml|yml|toml|ini|cfg|conf|log|sh|js|ts|tsx|css|html?|xml|svg|tex|rst|env)$/i;

export function previewKind(path: string, contentType: string): PreviewKind {
  const type = contentType.split(';')[0]!.trim().toLowerCase();
  const lower = path.toLowerCase();
  if (lower.endsWith('.ipynb')) return 'notebook';
  if (lower.endsWith('.csv') || lower.endsWith('.tsv') || type === 'text/csv' || type === 'text/tab-separated-values') return 'csv';
  if (RASTER.has(type)) return 'image';
  if (TEXT_TYPES.test(type) || TEXT_EXT.test(lower)) return 'text';
  return 'none';
}

/** Bytes read for a preview: text and CSV show the start of a large file; a notebook is read whole up to this. */
export const PREVIEW_BYTES = { text: 512 * 1024, csv: 256 * 1024, notebook: 20 * 1024 * 1024 } as const;
