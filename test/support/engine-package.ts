// A small npm package standing in for an engine's CLI where the real one (hundreds of MB) is not
// the point: a tarball with an executable that answers `--version`, installed by the real npm
// through the real install code (src/engines/catalog.ts's `spec`).
import { execFile } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { type InstalledEngine, installEngine } from '../../src/engines/catalog.ts';
import { startTestService, type TestService } from './service.ts';

export interface EnginePackage {
  /** The tarball, as `npm install` takes it. */
  from: string;
  version: string;
  /** Where its executable is under node_modules. */
  executables: string[];
}

/**
 * Packs `errand-fake-engine` at `version`; its executable prints `reports` for --version
 * (the version itself unless told otherwise) and exits with `exitCode`.
 */
export async function packEngine(
  version: string,
  opts: { reports?: string; exitCode?: number } = {},
): Promise<EnginePackage> {
  const root = await mkdtemp(path.join(tmpdir(), 'errand-fake-engine-'));
  const pkg = path.join(root, 'package');
  await mkdir(path.join(pkg, 'bin'), { recursive: true });
  await writeFile(
    path.join(pkg, 'package.json'),
    JSON.stringify({ name: 'errand-fake-engine', version, bin: { 'fake-engine': 'bin/engine' } }),
  );
  const bin = path.join(pkg, 'bin', 'engine');
  await writeFile(
    bin,
    `#!/bin/sh\necho "fake-engine ${opts.reports ?? version}"\nexit ${opts.exitCode ?? 0}\n`,
  );
  await chmod(bin, 0o755);
  const tarball = path.join(root, `errand-fake-engine-${version}.tgz`);
  await promisify(execFile)('tar', ['-czf', tarball, '-C', root, 'package']);
  return { from: tarball, version, executables: ['errand-fake-engine/bin/engine'] };
}

/** A test service with an engines directory of its own, where the stand-in is Codex. */
export interface ServiceWithCodex {
  svc: TestService;
  /** The service's ERRAND_ENGINES_DIR, a temporary one. */
  enginesDir: string;
  codex: InstalledEngine;
  /** Stops the service and removes the engines directory. */
  close(): Promise<void>;
}

/**
 * Starts a test service (no worker) whose engines directory holds the stand-in (version 1.0.0)
 * installed as Codex by the real install code; Claude Code and OpenCode are not installed.
 */
export async function startServiceWithCodex(): Promise<ServiceWithCodex> {
  const enginesDir = await mkdtemp(path.join(tmpdir(), 'errand-engines-'));
  const codex = await installEngine({ enginesDir }, 'codex', {
    log: () => {},
    spec: await packEngine('1.0.0'),
  });
  const svc = await startTestService({ worker: false, env: { ERRAND_ENGINES_DIR: enginesDir } });
  return {
    svc,
    enginesDir,
    codex,
    close: async () => {
      await svc.close();
      await rm(enginesDir, { recursive: true, force: true });
    },
  };
}
