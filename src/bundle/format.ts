/**
 * The bundle format version, separate from the tool version. Readers accept the same major and refuse a
 * newer major (a bundle written by a future cni-rewind whose layout they cannot trust).
 */
export const BUNDLE_FORMAT_VERSION = '1.1.0';
/** 1.1: encrypted files carry their path as associated data and the manifest of an encrypted bundle has a MAC. */
