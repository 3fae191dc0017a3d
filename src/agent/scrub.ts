// Removes known secret values (model keys, tokens) from text before it is stored or shown.
// A second line of defence: secrets are kept out of events and errors in the first place.
export function scrubSecrets(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) {
    if (secret.length >= 8 && out.includes(secret)) out = out.split(secret).join('[redacted]');
  }
  return out;
}
