import {
  createCipheriv,
  createDecipheriv,
  createPublicKey,
  diffieHellman,
  generateKeyPairSync,
  hkdfSync,
  randomBytes,
  type KeyObject,
} from 'node:crypto';
import type { SealedBox } from '@threadwork/contracts';

// Sealed replies: a caller that shares its NATS identity with others (every runner is `runner`)
// shares its reply inboxes with them too, so whoever holds that identity's key may subscribe to
// them and read every reply. For an endpoint marked `sealed`, the caller sends a one-time X25519
// public key with the request (REPLY_KEY_HEADER) and the responder encrypts the reply to it:
// ECDH with a one-time key of its own, HKDF-SHA256 over the shared secret, AES-256-GCM with the
// endpoint's subject as associated data (a reply sealed for one endpoint does not open as another's).
// Only node:crypto; both key pairs live for one request.

/** The request header carrying the caller's one-time X25519 public key (raw 32 bytes, base64url). */
export const REPLY_KEY_HEADER = 'Tw-Reply-Key';

const INFO = Buffer.from('threadwork sealed reply v1');
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;

/** A caller's one-time key pair: the public half goes with the request, the private half opens the reply. */
export interface ReplyKey {
  /** Raw X25519 public key, base64url: the header's value. */
  readonly publicKey: string;
  /** The reply's plaintext, or throws when the box was not sealed to this key for `aad` (or was altered). */
  open(box: SealedBox, aad: string): Uint8Array;
}

export function newReplyKey(): ReplyKey {
  const { publicKey, privateKey } = generateKeyPairSync('x25519');
  const raw = rawOf(publicKey);
  return {
    publicKey: raw.toString('base64url'),
    open: (box, aad) => openBox(privateKey, raw, box, aad),
  };
}

/**
 * The caller's key from a header value, or null when it is not one (absent, not base64url, not 32
 * bytes, or a point no shared secret comes from).
 */
export function parseReplyKey(value: string | undefined | null): KeyObject | null {
  if (!value || !/^[A-Za-z0-9_-]{43}$/.test(value)) return null;
  if (Buffer.from(value, 'base64url').length !== KEY_BYTES) return null;
  try {
    const key = createPublicKey({ key: { kty: 'OKP', crv: 'X25519', x: value }, format: 'jwk' });
    // Checked now, before the request is handled: a key that cannot be sealed to must not get
    // as far as an answer that then cannot be sent.
    const probe = generateKeyPairSync('x25519').privateKey;
    if (isDegenerate(diffieHellman({ privateKey: probe, publicKey: key }))) return null;
    return key;
  } catch {
    return null;
  }
}

const isDegenerate = (shared: Buffer) => shared.every((byte) => byte === 0);

/** Encrypts `plaintext` to the caller's key `to`, bound to `aad` (the endpoint's subject). */
export function seal(to: KeyObject, plaintext: Uint8Array, aad: string): SealedBox {
  const mine = generateKeyPairSync('x25519');
  const ours = rawOf(mine.publicKey);
  const key = derive(diffieHellman({ privateKey: mine.privateKey, publicKey: to }), ours, rawOf(to));
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(aad));
  const data = Buffer.concat([cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
  return { v: 1, key: ours.toString('base64url'), iv: iv.toString('base64url'), data: data.toString('base64url') };
}

function openBox(privateKey: KeyObject, mine: Buffer, box: SealedBox, aad: string): Uint8Array {
  const theirs = parseReplyKey(box.key);
  if (!theirs) throw new Error('sealed reply: bad responder key');
  const iv = Buffer.from(box.iv, 'base64url');
  const data = Buffer.from(box.data, 'base64url');
  if (iv.length !== IV_BYTES || data.length < TAG_BYTES) throw new Error('sealed reply: malformed');
  const key = derive(diffieHellman({ privateKey, publicKey: theirs }), rawOf(theirs), mine);
  const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
  decipher.setAAD(Buffer.from(aad));
  decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
  // final() throws when the tag does not match: altered bytes, another key, another subject.
  return Buffer.concat([decipher.update(data.subarray(0, data.length - TAG_BYTES)), decipher.final()]);
}

/** AES key from the shared secret, salted with both public keys (responder's, then caller's). */
function derive(shared: Buffer, responder: Buffer, caller: Buffer): Buffer {
  // A low-order public key makes the shared secret all zeros: anyone could compute it.
  if (isDegenerate(shared)) throw new Error('sealed reply: degenerate key');
  return Buffer.from(hkdfSync('sha256', shared, Buffer.concat([responder, caller]), INFO, KEY_BYTES));
}

function rawOf(publicKey: KeyObject): Buffer {
  const { x } = publicKey.export({ format: 'jwk' });
  if (!x) throw new Error('sealed reply: not an X25519 key');
  return Buffer.from(x, 'base64url');
}
