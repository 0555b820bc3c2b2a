/* placeholder until proxy/ lands */
int main(void);
int main(void)
{
    return 0;
}
