// Lint rules that catch mistakes (typescript-eslint's recommended set), not style: formatting is Prettier's.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'control-plane/**', 'calico-releases/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      // SDK and Kubernetes objects are untyped JSON in places; `any` there is deliberate and reviewed.
      '@typescript-eslint/no-explicit-any': 'off',
      // Escape sequences and control characters are what output escaping and its tests are about.
      'no-control-regex': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
  {
    // Plain JavaScript run by Node (the example provider, maintenance scripts).
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', URL: 'readonly', setTimeout: 'readonly' } },
  },
);
