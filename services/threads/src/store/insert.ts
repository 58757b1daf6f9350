import { isDuplicateKeyError, mongoCall, type Collection, type Document } from '@threadwork/platform';

/** Inserts unless a document with the same unique key exists; false when it did (someone else won). */
export async function insertIfAbsent<T extends Document>(collection: Collection<T>, doc: T): Promise<boolean> {
  try {
    await mongoCall(() => collection.insertOne(doc as Parameters<Collection<T>['insertOne']>[0]));
    return true;
  } catch (err) {
    if (isDuplicateKeyError(err)) return false;
    throw err;
  }
}
