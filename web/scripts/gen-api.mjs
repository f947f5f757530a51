#!/usr/bin/env node
// Regenerates web/src/api/schema.d.ts from the backend's OpenAPI document (run after `tsc -b`).
import { writeFileSync } from 'node:fs';
import { SCHEMA_FILE, generateApiSchema } from './api-schema.mjs';

writeFileSync(SCHEMA_FILE, await generateApiSchema());
console.error(`wrote ${SCHEMA_FILE}`);
