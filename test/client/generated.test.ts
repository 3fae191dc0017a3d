// src/client/openapi.ts must be what `npm run generate:client` writes for the current route
// schemas: a route changed without generating again fails here, with the command to run.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { generateClientTypes, TYPES_FILE } from './generate.ts';

test('the committed client types are the ones generated from the served OpenAPI document', async () => {
  const [committed, generated] = await Promise.all([
    readFile(TYPES_FILE, 'utf8'),
    generateClientTypes(),
  ]);
  assert.ok(generated.includes('AgentJob: {'), 'the generated types have the job record');
  assert.ok(
    committed === generated,
    'src/client/openapi.ts is stale: run `npm run generate:client` and commit the result',
  );
});
