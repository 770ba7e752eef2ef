import { describePaths } from './path-matrix-support.js';
describePaths([{ from: '3.27.4', to: '3.28.1' }]);
