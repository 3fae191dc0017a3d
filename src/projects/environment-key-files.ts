// The files whose content keys a project's environment (src/environments/): globs relative to the
// checkout, the project's own (environmentKeyFiles) or, when it has none, the common lock files.
// Said here, below the runtime and the admin API alike, so that a glob is refused when it is
// saved by the same rules the runtime relies on: relative, inside the checkout, bounded. The
// common lock files, the default, are the project record's (src/records/project.ts).

/** The most globs a project may list. */
export const MAX_ENVIRONMENT_KEY_FILES = 50;
/** The longest glob, in characters. */
export const MAX_ENVIRONMENT_KEY_FILE_CHARS = 200;

/**
 * Why `glob` cannot be one of a project's key files, or undefined when it can. A glob is
 * relative to the checkout and stays inside it: no leading `/`, no `..` segment. Control
 * characters and backslashes (an escape in a glob, a separator elsewhere) are refused, so that
 * the glob means one thing wherever it is read.
 */
export function environmentKeyFileRefusal(glob: string): string | undefined {
  if (glob.trim() === '') return 'a glob is empty';
  if (glob.length > MAX_ENVIRONMENT_KEY_FILE_CHARS)
    return `a glob is at most ${MAX_ENVIRONMENT_KEY_FILE_CHARS} characters`;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the control characters are what is refused
  if (/[\u0000-\u001f\u007f]/.test(glob))
    return `glob ${JSON.stringify(glob)} holds a control character`;
  if (glob.includes('\\'))
    return `glob ${JSON.stringify(glob)} holds a backslash: separate directories with /`;
  if (glob.startsWith('/') || glob.startsWith('~'))
    return `glob ${JSON.stringify(glob)} is absolute: give a path relative to the repository's root, as **/package-lock.json`;
  if (glob.split('/').some((segment) => segment === '..'))
    return `glob ${JSON.stringify(glob)} leaves the checkout (..): give a path inside the repository`;
  return undefined;
}
