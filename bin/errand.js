#!/usr/bin/env node
// The `errand` command: runs the TypeScript entry point directly (Node >= 22.18 strips types).
import '../src/main.ts';
