import assert from 'node:assert/strict';
import { test } from 'node:test';
import { plainTrace } from './trace.ts';

test("a trace loses GitLab's colours and section markers", () => {
  const raw =
    'section_start:1700000000:prepare_script[collapsed=true]\r\u001b[0K\u001b[36;1mPreparing\u001b[0;m\r\nok\rdone\n';
  assert.equal(plainTrace(raw), 'Preparing\nok\ndone\n');
});
