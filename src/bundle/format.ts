/**
 * The bundle format version, separate from the tool version. Readers accept the same major and refuse a
 * newer major (a bundle written by a future cni-rewind whose layout they cannot trust).
 */
export const BUNDLE_FORMAT_VERSION = '1.0.0';
