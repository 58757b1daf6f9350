// PKCE (RFC 7636, S256) for the GitHub App's install session: the verifier stays in the browser
// tab that started the installation, and only its hash goes to the gateway.

/** sessionStorage: this tab only, gone with it. */
export const VERIFIER_STORAGE_KEY = 'threadwork.repohost.code_verifier';

function base64url(bytes: Uint8Array): string {
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** 32 random bytes, base64url: 43 characters. */
export function newVerifier(): string {
  return base64url(crypto.getRandomValues(new Uint8Array(32)));
}

/** base64url(SHA-256(verifier)), unpadded. Needs a secure context (https, or localhost). */
export async function challengeOf(verifier: string): Promise<string> {
  if (!window.isSecureContext || !crypto.subtle) {
    throw new Error('the page must be served over https (or from localhost) to start an installation');
  }
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier));
  return base64url(new Uint8Array(digest));
}
