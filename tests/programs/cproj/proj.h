unsigned long alpha(unsigned long n);
unsigned long beta(const char *s);
double gamma_sum(int n);
