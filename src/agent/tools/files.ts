// What the tools that change the checkout share: opening without following a final symlink
// (a symlink planted by the model must never redirect a write), and naming a target that was
// reached through a symlink.

import { constants } from 'node:fs';
import * as fs from 'node:fs/promises';
import { isErrno, quote, type ResolvedPath } from './paths.ts';

const noFollow = constants.O_NOFOLLOW ?? 0;

export function describeTarget(target: ResolvedPath): string {
  return target.display === target.rel
    ? quote(target.rel)
    : `${quote(target.rel)} (through the symlink ${quote(target.display)})`;
}

export async function writeNoFollow(
  file: string,
  content: string,
  extraFlags: number,
): Promise<void> {
  const handle = await fs.open(
    file,
    constants.O_WRONLY | constants.O_TRUNC | noFollow | extraFlags,
    0o666,
  );
  try {
    await handle.writeFile(content);
  } finally {
    await handle.close();
  }
}

export async function readNoFollow(file: string): Promise<Buffer> {
  const handle = await fs.open(file, constants.O_RDONLY | noFollow);
  try {
    return await handle.readFile();
  } finally {
    await handle.close();
  }
}

export async function statOrUndefined(file: string) {
  try {
    return await fs.stat(file);
  } catch (err) {
    if (isErrno(err, 'ENOENT')) return undefined;
    throw err;
  }
}

export async function lstatOrUndefined(file: string) {
  try {
    return await fs.lstat(file);
  } catch (err) {
    if (isErrno(err, 'ENOENT')) return undefined;
    throw err;
  }
}
