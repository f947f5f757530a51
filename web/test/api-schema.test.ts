// The committed API types (web/src/api/schema.d.ts) must be what the backend's OpenAPI document
// generates now: a route or schema change without `npm run gen:api -w web` fails here.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { SCHEMA_FILE, backendOpenApiDocument, generateApiSchema } from '../scripts/api-schema.mjs';

describe('web/src/api/schema.d.ts', () => {
  it('is generated from the backend document as it is now (run `npm run gen:api -w web` when this fails)', async () => {
    const fresh = await generateApiSchema();
    expect(readFileSync(SCHEMA_FILE, 'utf8') === fresh, 'schema.d.ts is stale: run `npm run gen:api -w web` and commit it').toBe(true);
  });

  it('comes from the public document only: the routes the app calls are there, /internal is not', async () => {
    const doc = (await backendOpenApiDocument()) as { paths: Record<string, unknown> };
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining(['/api/v1/auth/login', '/api/v1/auth/me', '/api/v1/data-resources/{ws}/objects', '/api/v1/platform/workspaces/{id}/members']),
    );
    expect(Object.keys(doc.paths).filter((p) => !p.startsWith('/api/v1/'))).toEqual([]);
  });
});
